# resize.jq: a spec at problem size $n in each of its dimensions, its scalar arguments named
# in $scalars (space-separated, e.g. "M N K") filled with $n. jq --argjson n N --arg scalars S -f.
.KernelSpecification.ProblemSize |= map($n)
| .KernelSpecification.Arguments |= map(if (.Name | IN($scalars | split(" ")[])) then .FillValue = $n else . end)
