#!/usr/bin/env python3
# check_docs.py ROOT: the references of a kernelgraph tree hold: every docs/PAGE.md a file names
# exists (and the "Section" named after it is a heading of it), every relative Markdown link
# resolves to a file and heading, and no file cites the design notes kept outside the repository.
# Prints one line per problem, FILE:LINE: what; exits 1 when there is any.
import os
import re
import sys

SKIP_DIRS = {".git", "build", "bin", "fixtures", ".devdeps"}
# This script and its test, whose patterns and cases are what it looks for.
CHECKS_OF_THIS = {os.path.join("tests", "tools", "check_docs.py"), os.path.join("tests", "95-docs.bats")}
TEXT_EXTENSIONS = (".md", ".c", ".h", ".cu", ".sh", ".bats", ".py", ".bash")
# Files outside the repository that a clone does not have.
OUTSIDE = re.compile(r"DESIGN\.md|\.\./shared|/work/shared")
# A page's bare name, which only docs/ itself may use for its neighbours.
BARE = re.compile(r"(?<![\w/.-])(search|measurement|formats|landscape|design)\.md")
DOCS_REF = re.compile(r"docs/([\w-]+\.md)(?:,?\s+\"([^\"]+)\")?")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading):
    """A heading's anchor as GitHub makes it."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def headings(path, cache={}):
    if path not in cache:
        names = set()
        in_code = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("```"):
                    in_code = not in_code
                elif not in_code and line.startswith("#"):
                    names.add(line.lstrip("#").strip())
        cache[path] = names
    return cache[path]


def files(root):
    for base, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            path = os.path.join(base, name)
            if name.endswith(TEXT_EXTENSIONS) or (os.access(path, os.X_OK) and "pipelines" in base):
                yield path


def main():
    root = sys.argv[1]
    problems = []
    for path in files(root):
        rel = os.path.relpath(path, root)
        if rel in CHECKS_OF_THIS:
            continue  # they name broken references on purpose
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        for number, line in enumerate(lines, 1):
            where = f"{rel}:{number}"
            # A link's text may be a page's bare name: its target says where the page is.
            targets = re.sub(r"\[[^\]]*\]\(([^)\s]+)\)", r"\1", line)
            if OUTSIDE.search(line) or (not rel.startswith("docs" + os.sep) and BARE.search(targets)):
                problems.append(f"{where}: cites a file outside the repository: {line.strip()}")
            for page, section in DOCS_REF.findall(line):
                target = os.path.join(root, "docs", page)
                if not os.path.isfile(target):
                    problems.append(f"{where}: docs/{page} does not exist")
                elif section and section not in headings(target):
                    problems.append(f"{where}: docs/{page} has no section \"{section}\"")
            if not rel.endswith(".md"):
                continue
            for link in LINK.findall(line):
                if re.match(r"[a-z]+:", link):
                    continue
                file_part, _, anchor = link.partition("#")
                target = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(target):
                    problems.append(f"{where}: link to {link}: no such file")
                elif anchor and (not target.endswith(".md") or anchor not in {slug(h) for h in headings(target)}):
                    problems.append(f"{where}: link to {link}: no such heading")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
