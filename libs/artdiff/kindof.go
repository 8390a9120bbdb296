package artdiff

import (
	"fmt"
	"strings"
)

// writers name the tools that write each kind, for NotKind's message.
var writers = map[string]string{"object": "ipu-link or ipu-as", "package": "ipu-pack", "plan": "ipu-plan", "profile": "ipu-check --profile"}

// NotKind returns an error when data is an artifact of a known kind
// other than want (a kind's name, or what a tool reads that Detect does
// not know: "ONNX model", "profile", "assembly source"): what the file
// is and which tool writes what was wanted, so that a user who gave one
// phase another phase's file learns which step is missing. It returns
// nil when data is of kind want or of no known kind (the reader then
// says what is wrong).
func NotKind(data []byte, want string) error {
	k := Detect(data)
	if k == nil || k.Name == want {
		return nil
	}
	is := fmt.Sprintf("%s %s (written by %s)", article(k.Name), k.Name, writers[k.Name])
	a := article(strings.ToLower(want)) // "an ONNX model"
	if w := writers[want]; w != "" {
		return fmt.Errorf("%s, not %s %s (written by %s)", is, a, want, w)
	}
	return fmt.Errorf("%s, not %s %s", is, a, want)
}
