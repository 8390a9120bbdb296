package atomicfile

import (
	"os"
	"slices"
	"sync"
)

// Unfinished outputs. A temporary file or directory that is to become an
// output (WriteFile's, a device being created, a report directory) is
// tracked from its creation until the rename that publishes it, so that
// a tool stopped by a signal can remove it (RemovePending) instead of
// leaving a hidden partial file beside the output. A process killed
// outright (SIGKILL, a crash of the host) runs no handler; its temporary
// names are dotted (.NAME.tmp...) and never the output's.
var pending struct {
	sync.Mutex
	paths map[string]bool
}

// Create runs create, which makes a temporary file or directory and
// returns its path, and tracks that path as an unfinished output until
// the returned forget (call it once the output is published or removed).
// The creation and the tracking are one step for RemovePending: a
// signal cannot leave an untracked temporary output. Once RemovePending
// has run, Create, forget and Publish block and never return: the
// process is exiting.
func Create(create func() (string, error)) (forget func(), err error) {
	pending.Lock()
	defer pending.Unlock()
	path, err := create()
	if err != nil {
		return nil, err
	}
	if pending.paths == nil {
		pending.paths = map[string]bool{}
	}
	pending.paths[path] = true
	return func() {
		pending.Lock()
		defer pending.Unlock()
		delete(pending.paths, path)
	}, nil
}

// Publish runs publish (the rename, or renames, that make a tracked
// temporary output final) so that RemovePending runs wholly before or
// wholly after it: a stopped tool leaves the old output or the new one,
// never a half-swapped pair.
func Publish(publish func() error) error {
	pending.Lock()
	defer pending.Unlock()
	return publish()
}

// RemovePending removes every tracked output (a directory with its
// contents) and returns the paths removed and those it could not
// remove, with their errors, in path order. It keeps the registry locked
// for good: call it only on the way out of the process, whose other
// goroutines then block at their next Create, forget or Publish and
// cannot publish an output after it.
func RemovePending() (removed []string, failed map[string]error) {
	pending.Lock()
	paths := make([]string, 0, len(pending.paths))
	for p := range pending.paths {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			if failed == nil {
				failed = map[string]error{}
			}
			failed[p] = err
			continue
		}
		removed = append(removed, p)
	}
	return removed, failed
}
