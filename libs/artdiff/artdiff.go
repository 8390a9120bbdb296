// Package artdiff compares two artifacts of one kind and describes how
// they differ in the artifact's own terms, for ipu-diff and for tests that
// check that two builds agree.
//
// A byte comparison says only that two packages differ; a text diff of
// their dumps drowns a one-instruction change in 1,472 copies of it. This
// package decodes both files and reports, one line per difference:
//
//   - objects (.ipuobj): header fields; tiles added or removed; per tile,
//     the entry point, segments (added, removed, moved, resized, and the
//     first address whose contents differ), symbols (added, removed,
//     moved, resized) and exchange transfers (added, removed);
//   - packages (.ipuexe): header fields; which tiles load a different
//     image, compared tile by tile whatever the image numbering, with
//     the program differences as for objects;
//   - both: host program changes (phases, pages, inputs, outputs) and
//     device configuration writes added, removed or changed;
//   - plans (ipu-plan's JSON): header, graph, cost and search fields;
//     tensors paired by value, source and rank (not by ID), with their
//     layout changes and moves (tiles changed, bytes per tile by the
//     layout rules); steps paired by name and occurrence, with kernel,
//     split, tiles, cast order and operands (named by tensor role).
//
// Tiles with the same differences share their lines ("tiles 0-63,65:
// segment ..."). Lines come in a fixed order: header, tiles by first
// tile, host program, configuration; the same two files always give the
// same lines.
//
// Each kind is a Kind value in the kinds list: how to recognise a file
// (its magic), decode it, and list the differences of two decoded values.
// A new kind is one more file with a Kind and an entry in that list;
// fieldDiffs (go-cmp with a path reporter) gives field-by-field lines for
// structured values without hand-written code.
package artdiff

import (
	"fmt"
	"strings"
)

// Kind is an artifact kind that artdiff can compare.
type Kind struct {
	// Name is the kind in messages: "object", "package".
	Name string
	// Match reports whether a file's bytes are of this kind, from its
	// magic. It should not check the format version, so that Decode names
	// an unsupported version.
	Match func(data []byte) bool
	// Decode reads and validates a file of the kind.
	Decode func(data []byte) (any, error)
	// Diff lists the differences between two values Decode returned, in
	// output order; none when they are equivalent.
	Diff func(a, b any) []string
}

// kinds lists the known kinds in the order Detect tries them.
var kinds = []*Kind{objectKind, packageKind, planKind}

// Kinds returns the known kinds.
func Kinds() []*Kind { return append([]*Kind(nil), kinds...) }

// Detect returns the kind of a file's bytes, or nil.
func Detect(data []byte) *Kind {
	for _, k := range kinds {
		if k.Match(data) {
			return k
		}
	}
	return nil
}

// File is one side of a comparison: a name for messages and the bytes.
type File struct {
	Name string
	Data []byte
}

// Result is the outcome of a comparison.
type Result struct {
	Kind  *Kind
	Lines []string // one per difference; empty when the artifacts are equivalent
}

// Equal reports whether the artifacts are equivalent.
func (r *Result) Equal() bool { return len(r.Lines) == 0 }

// KindError reports two files that are not of one kind.
type KindError struct {
	A, B         string // file names
	KindA, KindB string // kind names
}

func (e *KindError) Error() string {
	return fmt.Sprintf("%s is %s %s, %s is %s %s: cannot compare artifacts of different kinds",
		e.A, article(e.KindA), e.KindA, e.B, article(e.KindB), e.KindB)
}

func article(noun string) string {
	if noun != "" && strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an"
	}
	return "a"
}

// Compare decodes a and b and lists their differences. It fails when a
// file is of no known kind, the kinds differ (*KindError), or a file does
// not decode; errors name the file.
func Compare(a, b File) (*Result, error) {
	ka, err := detect(a)
	if err != nil {
		return nil, err
	}
	kb, err := detect(b)
	if err != nil {
		return nil, err
	}
	if ka != kb {
		return nil, &KindError{A: a.Name, B: b.Name, KindA: ka.Name, KindB: kb.Name}
	}
	va, err := ka.Decode(a.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.Name, err)
	}
	vb, err := kb.Decode(b.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name, err)
	}
	return &Result{Kind: ka, Lines: ka.Diff(va, vb)}, nil
}

func detect(f File) (*Kind, error) {
	if k := Detect(f.Data); k != nil {
		return k, nil
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
	}
	return nil, fmt.Errorf("%s: not an artifact of a known kind (%s): unrecognised magic", f.Name, strings.Join(names, ", "))
}
