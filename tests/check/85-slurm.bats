#!/usr/bin/env bats
# 85-slurm.bats: kg-nightly --slurm against a real Slurm: a one-node cluster of this machine
# (tests/slurm/cluster.sh: munged, slurmctld and slurmd, two GPUs that are files), nights of
# recorded tables (per-spec replay). Needs root and Debian's munge, slurmctld, slurmd and
# slurm-client (make deps); skipped without them, except under CI (CI=true), where a
# cluster that cannot start fails the suite.

load ../test_helper

setup_file() {
	export XDG_CACHE_HOME="$BATS_FILE_TMPDIR/cache"
	local why=
	if [ "$(id -u)" -ne 0 ]; then
		why="not root (slurmd runs jobs as their users)"
	elif ! PATH=$PATH:/usr/sbin command -v slurmctld >/dev/null || ! command -v sbatch >/dev/null ||
		! PATH=$PATH:/usr/sbin command -v munged >/dev/null; then
		why="Slurm or munge is not installed (make deps installs them)"
	fi
	if [ -n "$why" ]; then
		[ "${CI:-}" != true ] || { echo "85-slurm.bats: CI runs the Slurm tests, but $why" >&2; return 1; }
		export NO_CLUSTER=$why # each test skips, saying why
		return 0
	fi
	CLUSTER=$BATS_FILE_TMPDIR/cluster
	"$KG_ROOT/tests/slurm/cluster.sh" start "$CLUSTER" >&2 || return 1
	export CLUSTER SLURM_CONF=$CLUSTER/slurm.conf
}

teardown_file() {
	[ -z "${CLUSTER:-}" ] || "$KG_ROOT/tests/slurm/cluster.sh" stop "$CLUSTER"
}

setup() {
	[ -z "${NO_CLUSTER:-}" ] || skip "no test cluster: $NO_CLUSTER"
	cd "$BATS_TEST_TMPDIR"
	ln -s "$KG_ROOT/examples" ex
}

teardown() { # a test that failed leaves none of its jobs to the next
	[ -z "${jobs:-}" ] || scancel $jobs 2>/dev/null || true
}

# evaluated RUN: the states evaluated in RUN, one per line.
evaluated() {
	jq -r 'select(.update.child != null and (.update.root | not)) | .build.state' "$1/events.jsonl"
}

# submitted: from kg-nightly --slurm's output, $stamp, $array, $end and $log, the night's;
# $jobs, for teardown.
submitted() {
	[[ $output =~ ^([0-9]{8}T[0-9]{6}Z):\ job\ array\ ([0-9]+)\ \(([0-9]+)\ tasks\),\ then\ job\ ([0-9]+)\;\ logs\ in\ (.+)$ ]]
	stamp=${BASH_REMATCH[1]} array=${BASH_REMATCH[2]} end=${BASH_REMATCH[4]} log=${BASH_REMATCH[5]}
	jobs="$array $end"
	[ "$log" = "$PWD/night/logs/$stamp.jsonl" ]
}

# wait_until SECONDS COMMAND...: COMMAND succeeds within SECONDS.
wait_until() {
	local limit=$(($1 * 10))
	shift
	until "$@"; do
		limit=$((limit - 1))
		[ "$limit" -gt 0 ] || { echo "not within the time: $*" >&2; cluster_state >&2; return 1; }
		sleep 0.1
	done
}

# cluster_state: what Slurm says of the jobs and what its daemons logged last, for a test
# that waited in vain.
cluster_state() {
	squeue -a -o '%i %T %r %S' 2>&1
	[ -z "${jobs:-}" ] || scontrol -o show job $jobs 2>&1 | grep -oE '(JobId|JobState|Reason|Restarts|StartTime|EndTime)=[^ ]*' |
		awk '/^JobId=/ && NR > 1 { print "" } { printf "%s ", $0 } END { print "" }'
	local f
	for f in "$CLUSTER/slurmctld.log" "$CLUSTER/slurmd.log"; do
		echo "--- $f"
		tail -n 25 "$f"
	done
}

ended() { # ended LOG: the night's end job wrote its last line
	[ -n "$(jq -c 'select(.nightly == "end")' "$1" 2>/dev/null)" ]
}

builds_at_least() { # builds_at_least RUN N
	[ -f "$1/events.jsonl" ] && [ "$(evaluated "$1" | wc -l)" -ge "$2" ]
}

@test "kg-nightly --slurm: a night of three specs, one task each on the GPUs Slurm gives it, then the end job: the logs, the runs, the ReGraph" {
	jq -n '{outdir: "night", budget_builds: 5, options: ["--no-llm"], specs: [
		{spec: "ex/vector_add/vector_add.json", replay: "ex/vector_add/vector_add_H100_T4.json"},
		{spec: "ex/softmax/softmax.json", replay: "ex/softmax/softmax_H100_T4.json", budget_builds: 4},
		{spec: "ex/transpose/transpose.json", replay: "ex/transpose/transpose_H100_T4.json", options: ["--seed", "3"]}]}' >nightly.json
	# two GPUs a task: the node's two, so the tasks run one after the other
	run_tool 0 kg-nightly --slurm --gpus-per-task 2 --time 10 nightly.json
	assert_stderr_empty
	submitted
	[ "$(sed -n 's/^#SBATCH //p' "night/logs/$stamp.slurm/array.sh")" = "$(printf '%s\n' --job-name=kg-nightly --array=0-2 \
		"--output=$PWD/night/logs/$stamp.slurm/task-%a.out" --open-mode=append --gres=gpu:2 --time=10 --signal=B:USR1@120)" ]
	[ "$(scontrol -o show job "$end" | grep -o 'Dependency=[^ ]*')" = "Dependency=afterany:${array}_*(unfulfilled)" ]
	wait_until 120 ended "$log"
	jobs=
	ex=$PWD/ex night=$PWD/night
	# start (both jobs named), each task's records and its "spec" line (GPUs 0,1 as CUDA
	# numbers them), a "task" line each with Slurm's word, the end with the ReGraph rebuilt
	# (the ReGraph each spec's search used depends on which tasks ended before it started)
	[ "$(jq -c 'select(.nightly) | del(.t, .pid, .seconds, .best, .regraph, .fingerprint, .slurm.job_id, .slurm.node)' "$log")" = \
		"$(jq -cn --arg ex "$ex" --arg night "$night" --argjson a "$array" --argjson e "$end" '
		def spec(k; b; i): {nightly: "spec", spec: "\($ex)/\(k)/\(k).json", run: "\($night)/kernels/\(k)",
			replay: "\($ex)/\(k)/\(k)_H100_T4.json", status: 0, builds: b, end: "budget", converged: null,
			slurm: {array_job_id: $a, array_task_id: i, cuda_visible_devices: "0,1", gpus: "0,1", restarts: 0}};
		def task(k; b; i): {nightly: "task", spec: "\($ex)/\(k)/\(k).json", run: "\($night)/kernels/\(k)", builds: b,
			slurm: {array_job_id: $a, array_task_id: i, state: "COMPLETED", exit_code: "0:0"}};
		{nightly: "start", config: "nightly.json", outdir: $night, specs: 3, slurm: {array_job_id: $a, end_job_id: $e}},
		spec("vector_add"; 5; 0), spec("softmax"; 4; 1), spec("transpose"; 5; 2),
		task("vector_add"; 5; 0), task("softmax"; 4; 1), task("transpose"; 5; 2),
		{nightly: "end", failed: 0, regraph_status: 0}')" ]
	[ "$(jq -c 'select(.nightly == "end") | .regraph' "$log")" = "{\"file\":\"$night/regraph.json\",\"rows\":14,\"kernels\":3}" ]
	[ "$(jq -c 'select(.nightly == "end") | .regraph' "$log")" = "$(jq -c --arg f "$night/regraph.json" '{file: $f, rows, kernels}' night/regraph.json)" ]
	# each task's job id is its own, Slurm's
	[ "$(jq -r 'select(.nightly == "task") | "\(.slurm.array_task_id) \(.slurm.job_id)"' "$log" | sort -n | tr '\n' ,)" = \
		"$(scontrol -o show job "$array" | grep -o 'JobId=[0-9]* ArrayJobId=[0-9]* ArrayTaskId=[0-9]*' |
			awk '{ sub("JobId=", "", $1); sub("ArrayTaskId=", "", $3); print $3, $1 }' | sort -n | tr '\n' ,)" ]
	# every record of every task, in task order (with the last build left, the second GPU's
	# pick of vector_add and transpose is written over the budget: "propose" over_budget)
	[ "$(jq -r 'select(.nightly | not) | if .op == "stop" then "stop \(.reason)" else "\(.kernel) \(.update.child != null)" end' "$log" | uniq -c | tr -s ' ' | tr '\n' ,)" = \
		" 5 vector_add true, 1 vector_add false, 1 stop budget, 4 softmax true, 1 stop budget, 5 transpose true, 1 transpose false, 1 stop budget," ]
	[ "$(jq -r 'select(.propose) | "\(.kernel) \(.propose.status)"' "$log" | tr '\n' ,)" = "vector_add over_budget,transpose over_budget," ]
	# the text log: each task's output, then a line a task
	[ "$(cat "night/logs/$stamp.log")" = "$(printf 'kg-nightly: %s: exit status 0, %s builds\n' \
		"$ex/vector_add/vector_add.json" 5 "$ex/softmax/softmax.json" 4 "$ex/transpose/transpose.json" 5
		jq -r 'select(.nightly == "task") | "kg-nightly: task \(.slurm.array_task_id) (job \(.slurm.job_id)): COMPLETED, \(.builds) builds: \(.spec)"' "$log")" ]
	for k in vector_add softmax transpose; do
		[ "$(evaluated "night/kernels/$k" | sort | uniq -d)" = "" ]
	done
	[ "$(evaluated night/kernels/vector_add | wc -l) $(evaluated night/kernels/softmax | wc -l) $(evaluated night/kernels/transpose | wc -l)" = "5 4 5" ]
	# the tasks' files were merged into the night's logs; the scripts and counts are kept
	[ "$(cd "night/logs/$stamp.slurm" && ls | tr '\n' ' ')" = "array.sh end.out end.sh night.json task-0.before task-1.before task-2.before " ]
	[ ! -s "night/logs/$stamp.slurm/end.out" ]
	# a task run twice (by hand, here) goes on to the same night's budget: nothing more
	SLURM_ARRAY_TASK_ID=0 run_tool 0 kg-nightly-slurm --task "night/logs/$stamp.slurm"
	assert_output "kg-nightly: $ex/vector_add/vector_add.json: exit status 0, 5 builds"
	assert_stderr_empty
	[ "$(evaluated night/kernels/vector_add | wc -l)" -eq 5 ]
	[ "$(jq -c 'select(.nightly == "spec") | [.status, .builds, .slurm.array_task_id, .slurm.gpus]' "night/logs/$stamp.slurm/task-0.jsonl")" = '[0,5,0,"0"]' ]
}

@test "kg-nightly --slurm: a task requeued goes on to its night's budget, one cancelled is reported with its ids and state; the next night resumes it, nothing evaluated twice" {
	jq -n '{outdir: "night", options: ["--no-llm"], specs: [
		{spec: "ex/vector_add/vector_add.json", replay: "ex/vector_add/vector_add_H100_T4.json", budget_builds: 100},
		{spec: "ex/lora_expand/lora_expand.json", replay: "ex/lora_expand/lora_expand_H100_T4.json", budget_builds: 50}]}' >nightly.json
	run_tool 0 kg-nightly --slurm nightly.json
	submitted
	# (a task evaluates about 20 candidates a second: the first ones will do)
	wait_until 60 builds_at_least night/kernels/lora_expand 1
	run_tool 0 scontrol requeue "${array}_1"
	wait_until 60 builds_at_least night/kernels/vector_add 5
	run_tool 0 scancel "${array}_0"
	# a requeued job waits two minutes before it may start again: now, once slurmd has ended
	# both tasks (the node idle: under load it ends them well after squeue says PENDING) and
	# the second of that is over (slurmd refuses a launch whose credential is as old as the
	# revoked one's, and holds the job)
	wait_until 60 eval '[ "$(squeue -h -j "${array}_1" -o %T)" = PENDING ]'
	wait_until 60 eval '[ "$(sinfo -h -n kgnode -o %T)" = idle ]'
	sleep 2
	run_tool 0 scontrol update JobId="${array}_1" StartTime=now
	wait_until 120 ended "$log"
	cancelled=$(evaluated night/kernels/vector_add | wc -l)
	[ "$cancelled" -ge 5 ] && [ "$cancelled" -lt 100 ]
	# the requeued task ran twice, to its night's 50 builds; the cancelled one wrote no line
	# of its own: the end job's says what Slurm did, and the builds its run gained
	[ "$(jq -c 'select(.nightly == "spec") | [.spec, .status, .builds, .slurm.array_task_id, .slurm.restarts]' "$log")" = \
		"[\"$PWD/ex/lora_expand/lora_expand.json\",0,50,1,1]" ]
	[ "$(jq -c 'select(.nightly == "task") | [.builds, .slurm.array_job_id, .slurm.array_task_id, .slurm.state, .slurm.exit_code]' "$log" | tr -d '\n')" = \
		"[$cancelled,$array,0,\"CANCELLED\",\"0:15\"][50,$array,1,\"COMPLETED\",\"0:0\"]" ]
	[ "$(jq -c 'select(.nightly == "task" and .slurm.array_task_id == 0) | .slurm.job_id' "$log")" = \
		"$(scontrol -o show job "$array" | grep -o 'JobId=[0-9]* ArrayJobId=[0-9]* ArrayTaskId=0 ' | sed 's/JobId=\([0-9]*\).*/\1/')" ]
	[ "$(jq -c 'select(.nightly == "end") | [.failed, .regraph_status]' "$log")" = '[1,0]' ]
	grep -q "CANCELLED AT .* DUE TO JOB REQUEUE" "night/logs/$stamp.log"
	grep -q "JOB [0-9]* ON kgnode CANCELLED AT [0-9T:-]* \*\*\*$" "night/logs/$stamp.log"
	[ "$(evaluated night/kernels/lora_expand | wc -l)" -eq 50 ]
	for k in vector_add lora_expand; do
		[ "$(evaluated "night/kernels/$k" | sort | uniq -d)" = "" ]
		evaluated "night/kernels/$k" >"$k.1"
	done
	# the next night, 20 builds each, resumes both runs where they stand
	jq '.budget_builds = 20 | .specs |= map(del(.budget_builds))' nightly.json >next.json
	sleep 1 # a night is named by the second it is submitted
	run_tool 0 kg-nightly --slurm next.json
	submitted
	wait_until 120 ended "$log"
	jobs=
	[ "$(jq -c 'select(.nightly == "task") | [.builds, .slurm.state]' "$log" | tr -d '\n')" = '[20,"COMPLETED"][20,"COMPLETED"]' ]
	[ "$(jq -c 'select(.nightly == "end") | .failed' "$log")" = 0 ]
	for k in vector_add lora_expand; do
		evaluated "night/kernels/$k" >"$k.2"
		[ "$(wc -l <"$k.2")" -eq $(($(wc -l <"$k.1") + 20)) ]
		[ "$(head -n "$(wc -l <"$k.1")" "$k.2")" = "$(cat "$k.1")" ]
		[ "$(sort "$k.2" | uniq -d)" = "" ]
	done
}

@test "kg-nightly --slurm: a task told its time limit is near (USR1, as --signal=B:USR1@120 sends it) stops after the iteration in flight: its spec line, every record it measured in the night's log" {
	jq -n '{outdir: "night", options: ["--no-llm"], specs: [
		{spec: "ex/vector_add/vector_add.json", replay: "ex/vector_add/vector_add_H100_T4.json", budget_builds: 100}]}' >nightly.json
	run_tool 0 kg-nightly --slurm --gpus-per-task 0 nightly.json
	submitted
	wait_until 60 builds_at_least night/kernels/vector_add 5
	run_tool 0 scancel --batch --signal=USR1 "${array}_0"
	wait_until 120 ended "$log"
	jobs=
	stopped=$(evaluated night/kernels/vector_add | wc -l)
	[ "$stopped" -ge 5 ] && [ "$stopped" -lt 100 ]
	[ "$(jq -c 'select(.nightly == "spec" or .nightly == "task") | [.nightly, .status, .builds, .slurm.state, .slurm.exit_code]' "$log" | tr -d '\n')" = \
		"[\"spec\",130,$stopped,null,null][\"task\",null,$stopped,\"FAILED\",\"130:0\"]" ]
	# every candidate the run learned is in the night's log: none was lost to the stop
	[ "$(jq -r 'select(.update.child != null and (.update.root | not)) | .build.state' "$log")" = "$(evaluated night/kernels/vector_add)" ]
	grep -qx 'kg-nightly: SIGUSR1 (the time limit is near): kg-tune stops after the iteration in flight' "night/logs/$stamp.log"
	grep -qx 'kg-tune: interrupted; finishing the iteration in flight; kg-tune --resume carries on' "night/logs/$stamp.log"
}

@test "kg-nightly --slurm: a job sbatch refuses is said, exit 1, nothing left; a night is not submitted while the last one is in the queue, exit 6" {
	jq -n '{outdir: "night", specs: [{spec: "ex/vector_add/vector_add.json", replay: "ex/vector_add/vector_add_H100_T4.json"},
		{spec: "ex/softmax/softmax.json", replay: "ex/softmax/softmax_H100_T4.json"}]}' >nightly.json
	run_tool 1 kg-nightly --slurm --partition nosuch nightly.json
	[[ $stderr == "kg-nightly: sbatch refused $PWD/night/logs/"*".slurm/array.sh: sbatch: error: invalid partition specified: nosuch"* ]]
	assert_output ""
	[ "$(ls night/logs)" = "" ]
	# held, the night's jobs stay in the queue
	run_tool 0 kg-nightly --slurm --sbatch-opt --hold nightly.json
	submitted
	[ "$(squeue -h -j "$array,$end" -o '%i %T %r' | sort)" = "$(printf '%s\n' "$end PENDING JobHeldUser" "${array}_[0-1] PENDING JobHeldUser" | sort)" ]
	run_tool 6 kg-nightly --slurm nightly.json
	assert_stderr "kg-nightly: the night $stamp ($PWD/night/logs/$stamp.slurm) is still in Slurm's queue (jobs $array, $end); not submitting"
	assert_output ""
	[ "$(ls night/logs | tr '\n' ' ')" = "$stamp.jsonl $stamp.slurm " ]
	scancel "$array" "$end"
	wait_until 30 eval '[ -z "$(squeue -h -j "$array,$end" 2>/dev/null)" ]'
	jobs=
}
