#!/usr/bin/env bats
# 03-t1.bats: T1 spec loading and the configuration space, through kg-propose --count:
# counts agree with CPython's own rules, and every kind of bad spec gets one clear line.

load test_helper

# spec_with FILTER: writes the minimal spec changed by the jq FILTER to $S.
spec_with() {
	S="$BATS_TEST_TMPDIR/spec.json"
	jq "$1" "$FIXTURES/t1/minimal.json" > "$S"
}

# count_fails STATUS MESSAGE: kg-propose --count on $S fails with STATUS and MESSAGE.
count_fails() {
	run_tool "$1" kg-propose --exhaustive --count --spec "$S"
	assert_output ""
	assert_stderr "kg-propose: $S: $2"
}

@test "the variations of published files are read: raw Values arrays, one Budget object, numeric sizes" {
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = [1, 2, 3]
		| .Budget = {"Type": "ConfigurationCount", "BudgetValue": 10}
		| .General = {"FormatVersion": "0.0.1", "BenchmarkName": "vadd"}
		| .KernelSpecification.GlobalSize = {"X": 4096, "Y": 1, "Z": 1}
		| .KernelSpecification.Stream = null | .KernelSpecification.Misc = {"jitify": true}'
	run_tool 0 kg-propose --exhaustive --count --spec "$S"
	assert_output 11
}

@test "without Conditions the space is the whole Cartesian product" {
	spec_with 'del(.ConfigurationSpace.Conditions)'
	run_tool 0 kg-propose -x -c -s "$S"
	assert_output 16
}

@test "a condition on ProblemSize alone is checked once for the whole space" {
	spec_with '.ConfigurationSpace.Conditions += [{"Parameters": [], "Expression": "ProblemSize[0] > 2**20"}]'
	count_fails 1 "ConfigurationSpace: no configuration satisfies the conditions (of 16 Cartesian points)"
	spec_with '.ConfigurationSpace.Conditions += [{"Parameters": ["ProblemSize"], "Expression": "ProblemSize[0] >= 2**20"}]'
	run_tool 0 kg-propose -x -c -s "$S"
	assert_output 14
}

@test "a space without parameters has one, empty, configuration" {
	spec_with '.ConfigurationSpace = {"TuningParameters": []}
		| .KernelSpecification.GlobalSize.X = "4096" | .KernelSpecification.LocalSize.X = "256"'
	run_tool 0 kg-propose -x -s "$S"
	assert_output '{"v":1,"kernel":"vector_add","candidate":{"id":"exhaustive-1","proposer":"exhaustive","config":{}}}'
}

@test "malformed JSON is reported with line and column" {
	S="$BATS_TEST_TMPDIR/spec.json"
	printf '{\n  "ConfigurationSpace": {\n    "TuningParameters": [1, 2,,]\n' > "$S"
	run_tool 1 kg-propose -x -c -s "$S"
	assert_stderr "kg-propose: $S:3:31: invalid JSON"
}

@test "a spec that is not an object is refused" {
	S="$BATS_TEST_TMPDIR/spec.json"
	echo '[1, 2]' > "$S"
	count_fails 1 "a T1 spec must be a JSON object, not an array"
}

@test "an unreadable spec is a usage error" {
	S="$BATS_TEST_TMPDIR/absent.json"
	run_tool 2 kg-propose -x -c -s "$S"
	assert_stderr "kg-propose: cannot read '$S': No such file or directory"
}

@test "missing required T1 fields are named" {
	spec_with 'del(.ConfigurationSpace)'
	count_fails 1 "ConfigurationSpace: missing (required by T1)"
	spec_with 'del(.ConfigurationSpace.TuningParameters[1].Values)'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Values: missing (required by T1)"
	spec_with 'del(.KernelSpecification.KernelName)'
	count_fails 1 "KernelSpecification.KernelName: missing (required by T1)"
	spec_with 'del(.KernelSpecification.LocalSize.X)'
	count_fails 1 "KernelSpecification.LocalSize.X: missing (required by T1)"
	spec_with 'del(.ConfigurationSpace.Conditions[0].Parameters)'
	count_fails 1 "ConfigurationSpace.Conditions[0].Parameters: missing (required by T1)"
	spec_with 'del(.KernelSpecification.Arguments[1].MemoryType)'
	count_fails 1 "KernelSpecification.Arguments[1].MemoryType: missing (required by T1)"
}

@test "fields of the wrong type or outside their enumeration are named" {
	spec_with '.ConfigurationSpace.TuningParameters = {}'
	count_fails 1 "ConfigurationSpace.TuningParameters: must be an array, not an object"
	spec_with '.ConfigurationSpace.TuningParameters[0].Type = "integer"'
	count_fails 1 "ConfigurationSpace.TuningParameters[0].Type: 'integer' is not one of int, uint, float, bool, string"
	spec_with '.KernelSpecification.Language = "HIP"'
	count_fails 1 "KernelSpecification.Language: 'HIP' is not one of CUDA, OpenCL, Vulkan, Hypertuner"
	spec_with '.KernelSpecification.Arguments[0].Type = "float3"'
	count_fails 1 "KernelSpecification.Arguments[0].Type: 'float3' is not one of bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, half, half2, half4, half8, half16, float, float2, float4, float8, float16, double, double2, double4, double8, double16, custom"
	spec_with '.Budget = [{"Type": "ConfigurationCount", "BudgetValue": "ten"}]'
	count_fails 1 "Budget[0].BudgetValue: must be a number, not a string"
	spec_with '.KernelSpecification.GlobalSizeType = "Blocks"'
	count_fails 1 "KernelSpecification.GlobalSizeType: 'Blocks' is not one of CUDA, OpenCL, Vulkan"
}

@test "parameter names must be unique identifiers" {
	spec_with '.ConfigurationSpace.TuningParameters[1].Name = "block_size_x"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Name: 'block_size_x' is already the name of TuningParameters[0]"
	spec_with '.ConfigurationSpace.TuningParameters[1].Name = "block-x"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Name: 'block-x' is not a valid name (letters, digits and _, not starting with a digit)"
}

@test "an unknown parameter name in a condition is named" {
	spec_with '.ConfigurationSpace.Conditions[0].Parameters += ["tile_y"]'
	count_fails 1 "ConfigurationSpace.Conditions[0].Parameters[2]: unknown tuning parameter 'tile_y'"
	spec_with '.ConfigurationSpace.Conditions[0].Expression = "block_size_x * tile_y <= 512"'
	count_fails 1 "ConfigurationSpace.Conditions[0].Expression: column 16: name 'tile_y' is not defined in \"block_size_x * tile_y <= 512\""
}

@test "a syntax error in Values is named with its column" {
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = "[1, 2, 3"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Values: column 9: invalid syntax: expected ']' before the end in \"[1, 2, 3\""
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = "list(range(1, 5)"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Values: column 17: invalid syntax: expected ')' before the end in \"list(range(1, 5)\""
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = "[i for i in range(4) if]"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Values: column 24: invalid syntax: unexpected ']' in \"[i for i in range(4) if]\""
}

@test "a division by zero in Values is named" {
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = "[64 // i for i in range(0, 4)]"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Values: column 5: integer division or modulo by zero in \"[64 // i for i in range(0, 4)]\""
}

@test "a division by zero in a condition names the configuration that caused it" {
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = "list(range(0, 4))"
		| .ConfigurationSpace.Conditions[0].Expression = "block_size_x % tile == 0"'
	count_fails 1 "ConfigurationSpace.Conditions[0].Expression: column 14: integer division or modulo by zero in \"block_size_x % tile == 0\" (with block_size_x=32, tile=0)"
}

@test "Values that give no list, an empty list or values of the wrong type are refused" {
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = "32"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Values: must give a list, not int"
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = "[i for i in range(4) if i > 9]"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Values: the list of values is empty"
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = "[1, 2.5]"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Values[1]: 2.5 is not an int (Type is int)"
	spec_with '.ConfigurationSpace.TuningParameters[1].Type = "uint" | .ConfigurationSpace.TuningParameters[1].Values = "[1, -1]"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Values[1]: -1 is not a non-negative int (Type is uint)"
	spec_with '.ConfigurationSpace.TuningParameters[1].Type = "string"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Values[0]: 1 is not a string (Type is string)"
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = "[2**60]"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Values[0]: 1152921504606846976 is not an int within 2**53 (beyond it, JSON numbers lose digits) (Type is int)"
}

@test "an empty space is an error, not an empty success" {
	spec_with '.ConfigurationSpace.Conditions[0].Expression = "block_size_x * tile > 4096"'
	count_fails 1 "ConfigurationSpace: no configuration satisfies the conditions (of 16 Cartesian points)"
	run_tool 1 kg-propose -x -s "$S"
	assert_output ""
	assert_stderr "kg-propose: $S: ConfigurationSpace: no configuration satisfies the conditions (of 16 Cartesian points)"
}

@test "launch sizes and argument sizes are compiled at load time" {
	spec_with '.KernelSpecification.GlobalSize.X = "ProblemSize[0] // blocksize"'
	count_fails 1 "KernelSpecification.GlobalSize.X: column 19: name 'blocksize' is not defined in \"ProblemSize[0] // blocksize\""
	spec_with '.KernelSpecification.Arguments[0].Size = "ProblemSize[0] *"'
	count_fails 1 "KernelSpecification.Arguments[0].Size: column 17: invalid syntax: unexpected end of expression in \"ProblemSize[0] *\""
	spec_with '.KernelSpecification.ProblemSize = ["1 << 20", "2 ** -"]'
	count_fails 1 "KernelSpecification.ProblemSize[1]: column 7: invalid syntax: unexpected end of expression in \"2 ** -\""
}

@test "every example spec loads, and its count agrees with CPython" {
	for spec in "$KG_ROOT"/examples/*/*.json; do
		case $spec in *_T4.json) continue ;; esac # a recorded table, not a spec
		run_tool 0 kg-propose --exhaustive --count --spec "$spec"
		ours=$output
		run python3 "$TOOLS/t1count.py" "$spec"
		[ "${output#* }" = "$ours" ]
	done
}

@test "the rest of the T1 schema is checked, field by field" {
	spec_with '.ConfigurationSpace.TuningParameters[1] = 5'
	count_fails 1 "ConfigurationSpace.TuningParameters[1]: must be an object, not a number"
	spec_with '.ConfigurationSpace.Conditions[0] = "block_size_x > 0"'
	count_fails 1 "ConfigurationSpace.Conditions[0]: must be an object, not a string"
	spec_with '.ConfigurationSpace.Conditions[0].Parameters = ["tile", 3]'
	count_fails 1 "ConfigurationSpace.Conditions[0].Parameters[1]: must be a string, not a number"
	spec_with '.ConfigurationSpace.TuningParameters[1].Name = "ProblemSize"'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Name: 'ProblemSize' is reserved for KernelSpecification.ProblemSize"
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = [1, {"a": 2}]'
	count_fails 1 "ConfigurationSpace.TuningParameters[1].Values[1]: must be a number, string or boolean, not an object"
	spec_with '.KernelSpecification.CompilerOptions = ["-O3", 3]'
	count_fails 1 "KernelSpecification.CompilerOptions[1]: must be a string, not a number"
	spec_with '.KernelSpecification.ProblemSize = {"x": 1}'
	count_fails 1 "KernelSpecification.ProblemSize: must be a number, a string or an array, not an object"
	spec_with '.KernelSpecification.ReferenceArguments = [{"Name": "ref", "FillType": "BinaryRaw"}]'
	count_fails 1 "KernelSpecification.ReferenceArguments[0].TargetName: missing (required by T1)"
	spec_with '.KernelSpecification.ReferenceArguments = [{"Name": "r", "TargetName": "c", "FillType": "BinaryRaw", "ValidationMethod": "Close"}]'
	count_fails 1 "KernelSpecification.ReferenceArguments[0].ValidationMethod: 'Close' is not one of AbsoluteDifference, SideBySideComparison, SideBySideRelativeComparison"
	spec_with '.Search = {"Attributes": []}'
	count_fails 1 "Search.Name: missing (required by T1)"
	spec_with '.Search = {"Name": "Random", "Attributes": [{"Name": "seed"}]}'
	count_fails 1 "Search.Attributes[0].Value: missing (required by T1)"
	spec_with '.Budget = [{"Type": "Hours", "BudgetValue": 1}]'
	count_fails 1 "Budget[0].Type: 'Hours' is not one of TuningDuration, ConfigurationCount, ConfigurationFraction"
	spec_with '.General = {"TimeUnit": "Minutes"}'
	count_fails 1 "General.TimeUnit: 'Minutes' is not one of Nanoseconds, Microseconds, Milliseconds, Seconds"
	spec_with '.KernelGraph = []'
	count_fails 1 "KernelGraph: must be an object, not an array"
	spec_with '.KernelGraph = {"SharedMemory": [1]}'
	count_fails 1 "KernelGraph.SharedMemory: must be a string (an expression) or a number, not an array"
	spec_with '.KernelGraph = {"SharedMemory": "4 *"}'
	run_tool 1 kg-propose --exhaustive --count --spec "$S"
	[[ "$stderr" == "kg-propose: $S: KernelGraph.SharedMemory: column "*"4 *"* ]]
	spec_with '.KernelGraph = {"Methods": {"nope": "change_block_sizes"}}'
	count_fails 1 "KernelGraph.Methods.nope: not a tuning parameter"
	spec_with '.KernelGraph = {"Methods": {"block_size_x": 3}}'
	count_fails 1 "KernelGraph.Methods.block_size_x: must be a method's name (a string)"
	spec_with '.Budget = [5]'
	count_fails 1 "Budget[0]: must be an object, not a number"
	spec_with '.KernelSpecification.Arguments[1] = "n"'
	count_fails 1 "KernelSpecification.Arguments[1]: must be an object, not a string"
	spec_with '.KernelSpecification.Arguments[0].FillType = "Zeros"'
	count_fails 1 "KernelSpecification.Arguments[0].FillType: 'Zeros' is not one of Constant, Random, Generator, Script, BinaryRaw, BinaryHDF"
	spec_with '.ConfigurationSpace.Conditions = {}'
	count_fails 1 "ConfigurationSpace.Conditions: must be an array, not an object"
}

@test "string Values with a stray UTF-8 byte split into one value per character" {
	spec_with '.ConfigurationSpace.TuningParameters += [{"Name": "s", "Type": "string",
		"Values": ("'"'"'\u00bf" + ("a" * 5000) + "'"'"'")}]'
	# jq writes U+00BF as two bytes; make it the lone continuation byte 0xBF.
	sed -i 's/\xc2\xbf/\xbf/' "$S"
	run_tool 0 kg-propose --exhaustive --count --spec "$S"
	assert_output $((14 * 5001))
}

@test "a runaway Values or condition is an error naming the limit, not a hang" {
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = "[i for i in range(10**4) for j in range(10**4) if i == j]"'
	count_fails 1 'ConfigurationSpace.TuningParameters[1].Values: column 56: evaluation step limit exceeded: more than 100000000 steps in "[i for i in range(10**4) for j in range(10**4) if i == j]"'
	spec_with '.ConfigurationSpace.Conditions[0].Expression = "[[tile]*10**7 for i in range(100)] != []"'
	count_fails 1 'ConfigurationSpace.Conditions[0].Expression: column 8: evaluation memory limit exceeded: more than 512 MiB of lists and strings in "[[tile]*10**7 for i in range(100)] != []" (with tile=1)'
	# One list shared a million times: a deep copy would make 10**12 items.
	spec_with '.ConfigurationSpace.TuningParameters[1].Values = "[[0]*10**6]*10**6"'
	count_fails 1 'ConfigurationSpace.TuningParameters[1].Values[0]: must be a number, a string or a boolean, not a list'
	spec_with '.KernelSpecification.ProblemSize = "[[0]*10**6]*10**6"'
	count_fails 1 'KernelSpecification.ProblemSize[0]: must be a number, a string or a boolean, not a list'
}

@test "--count counts exactly a 10-million-point space whose one condition reads every parameter" {
	# The count of 7 digits summing to at most 31 is 5000000 (by symmetry: 31.5 is the mean).
	spec_with '.ConfigurationSpace = {
		"TuningParameters": [range(7) | {"Name": "p\(.)", "Type": "int", "Values": "list(range(10))"}],
		"Conditions": [{"Parameters": [range(7) | "p\(.)"], "Expression": "p0 + p1 + p2 + p3 + p4 + p5 + p6 <= 31"}]}
		| .KernelSpecification.GlobalSize.X = "1024" | .KernelSpecification.LocalSize.X = "32"'
	run -0 --separate-stderr timeout 60 kg-propose --exhaustive --count --spec "$S"
	assert_output 5000000
}

@test "KernelGraph.TensorMaps: each map names a ReadOnly Vector argument, Dims and Box of one rank, a valid Swizzle" {
	local with_a='.KernelSpecification.Arguments += [{"Name": "a", "Type": "half", "MemoryType": "Vector", "AccessType": "ReadOnly", "Size": "ProblemSize[0]"}]'
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "a", "Dims": [1024, "ProblemSize[0] // 1024"], "Box": [64, "tile * 16"], "Swizzle": 128}]}'
	run_tool 0 kg-propose --exhaustive --count --spec "$S"
	assert_output 14
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": {}}'
	count_fails 1 "KernelGraph.TensorMaps: must be an array, not an object"
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [5]}'
	count_fails 1 "KernelGraph.TensorMaps[0]: must be an object, not a number"
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Dims": [1], "Box": [1]}]}'
	count_fails 1 "KernelGraph.TensorMaps[0].Argument: missing (required by T1)"
	# an output's buffer moves between launches (the kernel's, the reference's): inputs only
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "c", "Dims": [1], "Box": [1]}]}'
	count_fails 1 "KernelGraph.TensorMaps[0].Argument: 'c' is not the Name of a ReadOnly Vector argument of KernelSpecification.Arguments"
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "n", "Dims": [1], "Box": [1]}]}'
	count_fails 1 "KernelGraph.TensorMaps[0].Argument: 'n' is not the Name of a ReadOnly Vector argument of KernelSpecification.Arguments"
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "a", "Dims": [], "Box": []}]}'
	count_fails 1 "KernelGraph.TensorMaps[0].Dims: must have 1 to 5 entries, not 0"
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "a", "Dims": [1, 2], "Box": [1]}]}'
	count_fails 1 "KernelGraph.TensorMaps[0].Box: must have as many entries as Dims (2), not 1"
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "a", "Dims": [1, [2]], "Box": [1, 1]}]}'
	count_fails 1 "KernelGraph.TensorMaps[0].Dims[1]: must be a string (an expression) or a number, not an array"
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "a", "Dims": [1], "Box": ["nope"]}]}'
	run_tool 1 kg-propose --exhaustive --count --spec "$S"
	[[ "$stderr" == "kg-propose: $S: KernelGraph.TensorMaps[0].Box[0]: column "*"nope"* ]]
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "a", "Dims": [1], "Box": [1], "Swizzle": 16}]}'
	count_fails 1 "KernelGraph.TensorMaps[0].Swizzle: must be 0, 32, 64 or 128 (bytes), not 16"
}

@test "KernelGraph.TensorMaps are evaluated per configuration: a box past 256, past its dimension, of a ragged or over-wide row is an error naming the field" {
	local with_a='.KernelSpecification.Arguments += [{"Name": "a", "Type": "half", "MemoryType": "Vector", "AccessType": "ReadOnly", "Size": "ProblemSize[0]"}]'
	local config='{"block_size_x": 64, "tile": 4}'
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "a", "Dims": [1024, "ProblemSize[0] // 1024"], "Box": [64, "tile * 16"], "Swizzle": 128}]}'
	run_tool 0 "$KG_TEST_DRIVER" tensor-maps "$S" "$config"
	assert_output "a dims 1024,1024 box 64,64 swizzle 128"
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "a", "Dims": [1024, 1024], "Box": [64, "block_size_x * tile"]}]}'
	# 256 is the largest box a dimension may have
	run_tool 0 "$KG_TEST_DRIVER" tensor-maps "$S" "$config"
	assert_output "a dims 1024,1024 box 64,256 swizzle 0"
	run_tool 1 "$KG_TEST_DRIVER" tensor-maps "$S" '{"block_size_x": 128, "tile": 4}'
	assert_stderr 'kg-libtest: KernelGraph.TensorMaps[0].Box[1]: "block_size_x * tile" gives 512, more than 256, the most a tensor map'"'"'s box may span'
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "a", "Dims": [1024, "tile"], "Box": [64, 8]}]}'
	run_tool 1 "$KG_TEST_DRIVER" tensor-maps "$S" "$config"
	assert_stderr 'kg-libtest: KernelGraph.TensorMaps[0].Box[1]: "8" gives 8, more than the dimension'"'"'s size'
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "a", "Dims": [1024], "Box": [12]}]}'
	run_tool 1 "$KG_TEST_DRIVER" tensor-maps "$S" "$config"
	assert_stderr "kg-libtest: KernelGraph.TensorMaps[0].Box[0]: 12 elements of 2 bytes are not a multiple of 16 bytes"
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "a", "Dims": [1024], "Box": [128], "Swizzle": 128}]}'
	run_tool 1 "$KG_TEST_DRIVER" tensor-maps "$S" "$config"
	assert_stderr "kg-libtest: KernelGraph.TensorMaps[0].Box[0]: 128 elements of 2 bytes are more than Swizzle (128 bytes)"
	spec_with "$with_a"' | .KernelGraph = {"TensorMaps": [{"Argument": "a", "Dims": ["tile - 4"], "Box": [8]}]}'
	run_tool 1 "$KG_TEST_DRIVER" tensor-maps "$S" "$config"
	[[ "$stderr" == 'kg-libtest: KernelGraph.TensorMaps[0].Dims[0]: "tile - 4" gives 0, not a positive integer below 2**31'* ]]
}

@test "KernelGraph.Conditions and a ready patch's Conditions are read as ConfigurationSpace.Conditions are, and named when wrong" {
	spec_with '.KernelGraph = {"Conditions": [{"Expression": "tile < 4"}], "Patches": [{"Name": "p", "Conditions": [{"Parameters": ["tile"], "Expression": "tile >= 2"}]}]}'
	# they restrict a kernel's configurations (kg-propose), not the space
	run_tool 0 kg-propose --exhaustive --count --spec "$S"
	assert_output 14
	spec_with '.KernelGraph = {"Conditions": {}}'
	count_fails 1 "KernelGraph.Conditions: must be an array, not an object"
	spec_with '.KernelGraph = {"Conditions": ["tile < 4"]}'
	count_fails 1 "KernelGraph.Conditions[0]: must be an object, not a string"
	spec_with '.KernelGraph = {"Conditions": [{"Parameters": []}]}'
	count_fails 1 "KernelGraph.Conditions[0].Expression: missing (required by T1)"
	spec_with '.KernelGraph = {"Patches": [{"Patch": "x", "Conditions": []}]}'
	count_fails 1 "KernelGraph.Patches[0].Name: missing (required by T1)"
	for bad in '"hopper"' '"sm_9x"' '90' '"sm_90b"'; do
		spec_with ".KernelGraph = {\"Patches\": [{\"Name\": \"p\", \"Patch\": \"x\", \"Arch\": $bad}]}"
		count_fails 1 'KernelGraph.Patches[0].Arch: must be an architecture like "sm_90a"'
	done
	spec_with '.KernelGraph = {"Patches": [{"Name": "p", "Patch": "x", "Arch": "sm_100f"}]}'
	run_tool 0 kg-propose --exhaustive --count --spec "$S"
	spec_with '.KernelGraph = {"Patches": [{"Name": "p", "Conditions": [{"Expression": "nope > 1"}]}]}'
	run_tool 1 kg-propose --exhaustive --count --spec "$S"
	[[ "$stderr" == "kg-propose: $S: KernelGraph.Patches[0].Conditions[0].Expression: column "*"nope"* ]]
}
