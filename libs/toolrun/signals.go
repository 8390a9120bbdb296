package toolrun

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"ipu.local/libs/atomicfile"
)

// stopSignals are the signals that stop a tool in order: an interrupt
// (Ctrl-C), a termination request (kill, a batch scheduler's time limit)
// and a hangup.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// stopOnSignal makes one of stopSignals, until stop is called, remove
// the run's unfinished outputs (atomicfile.RemovePending: the temporary
// files and directories that would have been renamed into place), say so
// in one line on stderr and end the process by that same signal, as a
// shell expects of a stopped command (status 128 + the signal's number;
// a shell loop or make then stops too).
func stopOnSignal(name string, stderr io.Writer) (stop func()) {
	c := make(chan os.Signal, 1)
	for _, sig := range stopSignals {
		// One ignored when the tool started stays so: nohup's hangup, an
		// interrupt of a shell's background job.
		if !signal.Ignored(sig) {
			signal.Notify(c, sig)
		}
	}
	var mu sync.Mutex
	stopped, handling := false, false
	done := make(chan struct{})
	go func() {
		select {
		case s := <-c:
			mu.Lock()
			handling = !stopped
			mu.Unlock()
			if handling {
				exitBySignal(name, stderr, s)
			}
		case <-done:
		}
	}()
	return func() {
		signal.Stop(c)
		mu.Lock()
		stopped = true
		h := handling
		mu.Unlock()
		if h {
			// The run finished while the signal is being handled: the
			// process ends by the signal, not with the run's status.
			select {}
		}
		close(done)
	}
}

// exitBySignal removes the unfinished outputs, reports them and ends the
// process by s. It does not return.
func exitBySignal(name string, stderr io.Writer, s os.Signal) {
	removed, failed := atomicfile.RemovePending()
	fmt.Fprintf(stderr, "%s: stopped by signal: %v%s\n", name, s, removedNote(removed, failed))
	signal.Reset(s)
	if p, err := os.FindProcess(os.Getpid()); err == nil && p.Signal(s) == nil {
		time.Sleep(100 * time.Millisecond) // the default action ends the process
	}
	code := 1
	if n, ok := s.(syscall.Signal); ok {
		code = 128 + int(n)
	}
	os.Exit(code)
}

// removedNote is what exitBySignal says of the unfinished outputs: the
// ones removed, or the first that could not be.
func removedNote(removed []string, failed map[string]error) string {
	if len(failed) > 0 {
		paths := make([]string, 0, len(failed))
		for p := range failed {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		return fmt.Sprintf("; could not remove the unfinished output %s: %s", paths[0], oneLine(failed[paths[0]].Error()))
	}
	switch len(removed) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf(" (removed the unfinished output %s)", removed[0])
	}
	return fmt.Sprintf(" (removed %d unfinished outputs: %s, ...)", len(removed), removed[0])
}
