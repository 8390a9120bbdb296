package artdiff

import "fmt"

// writers name the tools that write each kind, for NotKind's message.
var writers = map[string]string{"object": "ipu-link", "package": "ipu-pack or ipu-as", "plan": "ipu-plan", "profile": "ipu-check --profile"}

// NotKind returns an error when data is an artifact of a known kind
// other than want ("plan", "object", "package", or "model" for an ONNX
// model and "profile" for a profile, which Detect does not know): what the file is and which tool
// writes what was wanted, so that a user who gave one phase another
// phase's file learns which step is missing. It returns nil when data is
// of kind want or of no known kind (the reader then says what is wrong).
func NotKind(data []byte, want string) error {
	k := Detect(data)
	if k == nil || k.Name == want {
		return nil
	}
	if want == "model" {
		return fmt.Errorf("%s %s (written by %s), not an ONNX model", article(k.Name), k.Name, writers[k.Name])
	}
	return fmt.Errorf("%s %s (written by %s), not %s %s (written by %s)", article(k.Name), k.Name, writers[k.Name], article(want), want, writers[want])
}
