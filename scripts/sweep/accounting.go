package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// jobRecord is how one job or array task ended, by Slurm's accounting.
type jobRecord struct {
	ID, State, Exit string
}

// reportAccounting prints how the array's tasks (ntasks of them) and
// the collect job ended: from sacct, or, on a cluster without
// accounting storage, from the job completion file
// (JobCompType=jobcomp/filetxt) that sacct would otherwise read. A
// cluster with neither is said so. slurmctld sends the jobs' ends to
// slurmdbd on its own time, so sacct is asked again, for up to
// accountingWait, while it lists fewer jobs or one not ended.
func (e *engine) reportAccounting(ctx context.Context, arrayID, collectID string, ntasks int) {
	recs, source, err := accounting(ctx, arrayID, collectID)
	for deadline := time.Now().Add(accountingWait); err == nil && source == "sacct" &&
		!settled(recs, ntasks+1) && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		recs, source, err = accounting(ctx, arrayID, collectID)
	}
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

// accountingWait is how long reportAccounting waits for sacct to list
// every job ended.
const accountingWait = 15 * time.Second

// settled reports whether recs holds at least n records, none of a job
// still pending, running or completing.
func settled(recs []jobRecord, n int) bool {
	if len(recs) < n {
		return false
	}
	for _, r := range recs {
		switch strings.Fields(r.State + " ")[0] {
		case "PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED":
			return false
		}
	}
	return true
}

// accounting returns the records of the array's tasks, sorted by task,
// and of the collect job, and where they came from.
func accounting(ctx context.Context, arrayID, collectID string) ([]jobRecord, string, error) {
	out, err := slurmCmd(ctx, "sacct", "-n", "-P", "-X", "-j", arrayID+","+collectID, "-o", "JobID,State,ExitCode")
	if err == nil {
		return sacctRecords(out, arrayID), "sacct", nil
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

// sacctRecords reads sacct -n -P's JobID|State|ExitCode lines: the
// array's tasks (ARRAY_TASK, or a range ARRAY_[...] not started),
// sorted by task, then the other jobs in sacct's order.
func sacctRecords(out, arrayID string) []jobRecord {
	var tasks, others []jobRecord
	var taskNum []int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(l, "|")
		if len(f) != 3 {
			continue
		}
		r := jobRecord{f[0], f[1], f[2]}
		task, ok := strings.CutPrefix(r.ID, arrayID+"_")
		if !ok {
			others = append(others, r)
			continue
		}
		n := -1
		fmt.Sscan(task, &n)
		tasks = append(tasks, r)
		taskNum = append(taskNum, n)
	}
	return append(sortedTasks(tasks, taskNum), others...)
}

// sortedTasks is tasks sorted by their numbers, stably.
func sortedTasks(tasks []jobRecord, taskNum []int) []jobRecord {
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return taskNum[a] - taskNum[b] })
	var out []jobRecord
	for _, i := range order {
		out = append(out, tasks[i])
	}
	return out
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
	return append(sortedTasks(tasks, taskNum), collectRecs...)
}
