/* draw.h: kg-select --draw: the search graph as a picture, for people (kg-report draws
 * graph.dot with it). */
#ifndef KG_SELECT_DRAW_H
#define KG_SELECT_DRAW_H

#include "common.h"

#include <stdio.h>

#include "graph.h"

enum draw_format { DRAW_DOT, DRAW_JSON };

/* Writes g's graph to fp as Graphviz DOT or as one JSON document of the same nodes and edges,
 * at most max_nodes nodes (the incumbent's path, then the fastest, each with the nodes that
 * lead to it from the root). A node per variant, filled by its speedup against the baseline
 * (green faster, red slower, grey failed, with its status), an edge per evaluated candidate
 * labelled by its method and configuration change, the incumbent's path thick. Everything
 * comes from g alone (never the log): the nodes in the order they were made, numbered by the
 * build that made each ("build N", as trace.md and kg-report number the candidates), the
 * edges in the order they were learned, the failures' statuses, the incumbent, the kernel's
 * name. A graph that lacks the numbers (graph_unnumbered) gets them first (number_from_log). */
void draw_graph(const struct graph *g, enum draw_format format, long max_nodes, FILE *fp);

#endif
