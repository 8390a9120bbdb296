package main

import (
	"fmt"
	"regexp"
	"strings"
)

// Status is the category of a case's result.
type Status int

// The categories, in the order the summary counts them.
const (
	Pass Status = iota
	Fail
	Unsupported
	NotLowered
)

// label is the status column of a result line.
func (s Status) label() string {
	switch s {
	case Pass:
		return "PASS"
	case Fail:
		return "FAIL"
	case Unsupported:
		return "UNSUPPORTED"
	case NotLowered:
		return "NOT-LOWERED"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// The tools of the pipeline, in the order a case runs them.
const (
	toolPlan  = "ipu-plan"
	toolLink  = "ipu-link"
	toolPack  = "ipu-pack"
	toolLoad  = "ipu-load"
	toolCheck = "ipu-check"
)

// failure is what a tool left behind when it did not succeed.
type failure struct {
	Tool   string
	Stdout string
	Stderr string
	// Exit is the tool's exit status, or -1 when it did not run to an
	// exit (see Reason).
	Exit int
	// Reason, when set, is why the runner gave up on the tool itself (not
	// found, timeout, killed); it overrides the tool's output.
	Reason string
	// Where, when set, names the run of the tool among several (the data
	// set ipu-check was given).
	Where string
}

// quoted matches a Go-quoted string (%q), as the libraries print node,
// input and attribute names.
const quoted = `"(?:[^"\\]|\\.)*"`

// refusal is one form of message with which the model reader
// (libs/onnx.ReadModel) or graph.Build (libs/graph) refuses a model for
// something outside the supported set, as opposed to a malformed model.
// label turns the submatches into the UNSUPPORTED text.
type refusal struct {
	re    *regexp.Regexp
	label func(m []string) string
}

// refusals lists the message forms, most specific first. Each comes from
// one line of the libraries (named in the comment); the tests build the
// real messages and check that they are recognised.
var refusals = []refusal{
	// graph.UnsupportedError: `unsupported operator %s (node %q)`, the
	// operator printed as is, or quoted when it holds spaces or
	// unprintable characters, and prefixed with its domain outside the
	// default one ("com.microsoft.FusedMatMul").
	{regexp.MustCompile(`unsupported operator (` + quoted + `|\S+) \(node ` + quoted + `\)`),
		func(m []string) string { return m[1] }},
	// graph inputs: `input %q: element type %v is not supported( by the
	// device)`.
	{regexp.MustCompile(`input (` + quoted + `): element type (\S+) is not supported(?: by the device)?$`),
		func(m []string) string { return "element type " + m[2] + " (input " + m[1] + ")" }},
	// node outputs (a Cast's target, a Constant): `node %q (%s): output
	// %q: element type double is not supported by the device`.
	{regexp.MustCompile(`node (` + quoted + `) \(\S+\): output (` + quoted + `): element type (\S+) is not supported by the device`),
		func(m []string) string { return "element type " + m[3] + " (node " + m[1] + " output " + m[2] + ")" }},
	// constants: `constant %q: element type double is not supported by
	// the device`.
	{regexp.MustCompile(`constant (` + quoted + `): element type (\S+) is not supported by the device`),
		func(m []string) string { return "element type " + m[2] + " (constant " + m[1] + ")" }},
	// constants and initializers: `constant %q: element type %v is not
	// supported as data`.
	{regexp.MustCompile(`constant (` + quoted + `): element type (\S+) is not supported as data`),
		func(m []string) string { return "element type " + m[2] + " (constant " + m[1] + ")" }},
	// arithmetic operators: `node %q (%s) input %d: element type %v of %q
	// is not supported by %s`.
	{regexp.MustCompile(`node ` + quoted + ` \((\S+)\) input \d+: element type (\S+) of ` + quoted + ` is not supported by `),
		func(m []string) string { return m[1] + " on element type " + m[2] }},
	// Cast: `node %q (%s): cast to %v is not supported`.
	{regexp.MustCompile(`node ` + quoted + ` \((\S+)\): cast to (\S+) is not supported`),
		func(m []string) string { return m[1] + " to " + m[2] }},
	// LayerNormalization: `node %q (%s): stash_type %v is not supported`.
	{regexp.MustCompile(`node ` + quoted + ` \((\S+)\): stash_type (\S+) is not supported`),
		func(m []string) string { return m[1] + " stash_type " + m[2] }},
	// Constant: `node %q (%s): constant attribute %q of type %v is not
	// supported`.
	{regexp.MustCompile(`node ` + quoted + ` \((\S+)\): constant attribute (` + quoted + `) of type (\S+) is not supported`),
		func(m []string) string { return m[1] + " attribute " + m[2] + " of type " + m[3] }},
	// opset < 7 binary operators: `node %q (%s) input 1: legacy broadcast
	// of %s into %s at axis %d is not supported`.
	{regexp.MustCompile(`node ` + quoted + ` \((\S+)\) input \d+: legacy broadcast of \S+ into \S+ at axis (-?\d+) is not supported`),
		func(m []string) string { return m[1] + " legacy broadcast (axis " + m[2] + ")" }},
	// onnx.ReadModel: `unsupported opset %d of the default domain`.
	{regexp.MustCompile(`unsupported opset (-?\d+) of the default domain`),
		func(m []string) string { return "opset " + m[1] }},
	// onnx tensors: `unsupported element type %v` and the storage forms
	// the reader refuses.
	{regexp.MustCompile(`: unsupported element type (\S+)`),
		func(m []string) string { return "element type " + m[1] }},
	{regexp.MustCompile(`: (segmented tensors|string tensors|external data) (?:are|is) not supported`),
		func(m []string) string { return m[1] }},
}

// classify gives the result of a case that stopped at f (first matching
// rule):
//   - ipu-plan refused the model for something outside the supported set:
//     UNSUPPORTED naming it;
//   - ipu-link said an operator `is not lowered`: NOT-LOWERED with its
//     message;
//   - anything else: FAIL naming the tool and its message.
func classify(f failure) (Status, string) {
	if f.Reason == "" {
		lines := stderrLines(f.Stderr)
		switch f.Tool {
		case toolPlan:
			for i := len(lines) - 1; i >= 0; i-- {
				for _, r := range refusals {
					if m := r.re.FindStringSubmatch(lines[i]); m != nil {
						return Unsupported, r.label(m)
					}
				}
			}
		case toolLink:
			for i := len(lines) - 1; i >= 0; i-- {
				if strings.Contains(lines[i], "is not lowered") {
					return NotLowered, strings.TrimPrefix(logTime.ReplaceAllString(lines[i], ""), toolLink+": ")
				}
			}
		}
	}
	name := f.Tool
	if f.Where != "" {
		name += ": " + f.Where
	}
	return Fail, name + ": " + failMessage(f)
}

// failMessage is the FAIL text after the tool's name: the runner's reason,
// or the tool's error line, or (ipu-check reports a mismatch in its
// verdicts, not as an error) the FAIL verdict lines with the first
// mismatch logged, or the last line on stderr, or the exit status.
func failMessage(f failure) string {
	if f.Reason != "" {
		return f.Reason
	}
	lines := stderrLines(f.Stderr)
	prefix := f.Tool + ": "
	for i := len(lines) - 1; i >= 0; i-- {
		if msg, ok := strings.CutPrefix(lines[i], prefix); ok && strings.TrimSpace(msg) != "" {
			return msg
		}
	}
	var verdicts []string
	for _, l := range stderrLines(f.Stdout) {
		if strings.Contains(l, "=FAIL") {
			verdicts = append(verdicts, l)
		}
	}
	if len(verdicts) > 0 {
		for _, l := range lines {
			if _, mismatch, ok := strings.Cut(l, "numerical mismatch"); ok {
				verdicts = append(verdicts, "numerical mismatch"+mismatch)
				break
			}
		}
		return strings.Join(verdicts, "; ")
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.TrimSpace(lines[i]) != f.Tool+":" {
			return logTime.ReplaceAllString(lines[i], "")
		}
	}
	return fmt.Sprintf("exit status %d", f.Exit)
}

// logTime matches the timestamp that starts a log line, dropped to keep
// the runner's output the same from run to run.
var logTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT[0-9:.]+Z\s+`)

// stderrLines splits captured output into its non-blank lines, without
// carriage returns.
func stderrLines(s string) []string {
	var lines []string
	for l := range strings.SplitSeq(s, "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
