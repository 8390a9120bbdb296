package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// jobRecord is how one job or array task ended, by Slurm's accounting.
type jobRecord struct {
	ID, State, Exit string
}

// reportAccounting prints how the array's tasks and the collect job
// ended: from sacct, or, on a cluster without accounting storage, from
// the job completion file (JobCompType=jobcomp/filetxt) that sacct
// would otherwise read. A cluster with neither is said so.
func (e *engine) reportAccounting(ctx context.Context, arrayID, collectID string) {
	recs, source, err := accounting(ctx, arrayID, collectID)
	if err != nil {
		fmt.Fprintf(e.log, "slurm: no accounting of jobs %s and %s: %s\n", arrayID, collectID, err)
		return
	}
	states := map[string]int{}
	for _, r := range recs {
		fmt.Fprintf(e.log, "slurm: %s %s %s exit %s\n", source, r.ID, r.State, r.Exit)
		states[r.State]++
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(states)) {
		parts = append(parts, fmt.Sprintf("%d %s", states[s], s))
	}
	fmt.Fprintf(e.log, "slurm: %s: %d jobs and tasks: %s\n", source, len(recs), strings.Join(parts, ", "))
}

// accounting returns the records of the array's tasks and the collect
// job, and where they came from.
func accounting(ctx context.Context, arrayID, collectID string) ([]jobRecord, string, error) {
	out, err := slurmCmd(ctx, "sacct", "-n", "-P", "-X", "-j", arrayID+","+collectID, "-o", "JobID,State,ExitCode")
	if err == nil {
		var recs []jobRecord
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Split(l, "|")
			if len(f) == 3 {
				recs = append(recs, jobRecord{f[0], f[1], f[2]})
			}
		}
		return recs, "sacct", nil
	}
	if !strings.Contains(err.Error(), "accounting storage is disabled") {
		return nil, "", err
	}
	conf, cerr := slurmCmd(ctx, "scontrol", "show", "config")
	if cerr != nil {
		return nil, "", fmt.Errorf("%v; %v", err, cerr)
	}
	compType, compLoc := configValue(conf, "JobCompType"), configValue(conf, "JobCompLoc")
	if compType != "jobcomp/filetxt" || compLoc == "" {
		return nil, "", fmt.Errorf("%v, and JobCompType is %q, not jobcomp/filetxt", err, compType)
	}
	b, rerr := os.ReadFile(compLoc)
	if rerr != nil {
		return nil, "", fmt.Errorf("%v; job completion file: %s", err, pathErr(rerr))
	}
	return jobcompRecords(string(b), arrayID, collectID), "jobcomp", nil
}

// configValue is the value of key in scontrol show config's "Key = value"
// lines.
func configValue(conf, key string) string {
	for _, l := range strings.Split(conf, "\n") {
		k, v, ok := strings.Cut(l, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// jobcompRecords reads jobcomp/filetxt's "Key=value ..." lines: the
// array's tasks (ArrayJobId) as ARRAY_TASK, sorted by task, then the
// collect job.
func jobcompRecords(text, arrayID, collectID string) []jobRecord {
	var tasks []jobRecord
	var taskNum []int
	var collectRecs []jobRecord
	for _, l := range strings.Split(text, "\n") {
		kv := map[string]string{}
		for _, f := range strings.Fields(l) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		switch {
		case kv["ArrayJobId"] == arrayID && kv["ArrayTaskId"] != "":
			var n int
			fmt.Sscan(kv["ArrayTaskId"], &n)
			tasks = append(tasks, jobRecord{arrayID + "_" + kv["ArrayTaskId"], kv["JobState"], kv["ExitCode"]})
			taskNum = append(taskNum, n)
		case kv["JobId"] == collectID:
			collectRecs = append(collectRecs, jobRecord{collectID, kv["JobState"], kv["ExitCode"]})
		}
	}
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return taskNum[a] - taskNum[b] })
	var out []jobRecord
	for _, i := range order {
		out = append(out, tasks[i])
	}
	return append(out, collectRecs...)
}
