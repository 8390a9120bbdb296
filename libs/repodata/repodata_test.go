package repodata

import (
	"os"
	"path/filepath"
	"testing"
)

// The committed copies stand in for the shared data: each root resolves, and
// the copies hold what the tests read.
func TestRoots(t *testing.T) {
	for name, f := range map[string]func() (Root, error){"conformance": Conformance, "models": Models, "seed": SeedLog} {
		r, err := f()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := os.Stat(r.Dir); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	repo, err := Repo()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"testdata/conformance/ort/qk_early_e4m3fnuz/model.onnx",
		"testdata/conformance/onnx-pytorch/test_Softmax/test_data_set_0/output_0.pb",
		"testdata/models/shared/bert_layer/model.onnx",
		"testdata/seed/000_ad3fbe4381067c88.txt",
	} {
		if _, err := os.Stat(filepath.Join(repo, p)); err != nil {
			t.Errorf("committed copy missing: %v", err)
		}
	}
}

// Without the folder beside the repository the copies are used; with
// it, its data; the
// environment overrides both.
func TestFind(t *testing.T) {
	top := t.TempDir()
	repo := filepath.Join(top, "repo")
	for _, d := range []string{repo, filepath.Join(repo, "testdata", "c"), filepath.Join(repo, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "go.work"), []byte("go 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(repo, "sub"))
	t.Setenv("IPU_TEST_ROOT", "")
	beside := filepath.Join("..", "beside", "c")
	copy := filepath.Join("testdata", "c")
	r, err := find("IPU_TEST_ROOT", beside, copy)
	if err != nil || r.Shared || r.Dir != filepath.Join(repo, copy) {
		t.Fatalf("clone alone: %+v %v", r, err)
	}
	if err := os.MkdirAll(filepath.Join(top, "beside", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	r, err = find("IPU_TEST_ROOT", beside, copy)
	if err != nil || !r.Shared || r.Dir != filepath.Join(repo, beside) {
		t.Fatalf("beside: %+v %v", r, err)
	}
	t.Setenv("IPU_TEST_ROOT", "/elsewhere")
	if r, err = find("IPU_TEST_ROOT", beside, copy); err != nil || r.Dir != "/elsewhere" {
		t.Fatalf("environment: %+v %v", r, err)
	}
	t.Setenv("IPU_TEST_ROOT", "")
	if err := os.RemoveAll(filepath.Join(repo, "testdata")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(top, "beside")); err != nil {
		t.Fatal(err)
	}
	if _, err := find("IPU_TEST_ROOT", beside, copy); err == nil {
		t.Fatal("found a root where there is none")
	}
}
