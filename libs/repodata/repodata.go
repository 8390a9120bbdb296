// Package repodata finds the data roots that tests read: the project's
// shared data beside the repository (../shared) when it is there, or else
// the copies committed under testdata/, so that a clone with nothing
// beside it has everything its tests need.
//
// Each root can be overridden by an environment variable, which wins when
// set: IPU_CONFORMANCE for the conformance cases, IPU_MODELS for the model
// cases, IPU_SEED_LOG for the seed log.
package repodata

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Repo returns the repository's root: the nearest directory holding
// go.work, from the working directory up.
func Repo() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the repository root: %w", err)
	}
	for dir := wd; ; {
		if st, err := os.Stat(filepath.Join(dir, "go.work")); err == nil && !st.IsDir() {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find the repository root: no go.work in " + wd + " or above")
		}
		dir = parent
	}
}

// Root is one data root: where it is, and whether it is the shared one.
type Root struct {
	Dir    string
	Shared bool // ../shared beside the repository, not a committed copy
}

// find returns the environment's dir when set, else the first of the
// repository-relative candidates that exists (the shared one first).
func find(env, shared, copy string) (Root, error) {
	if dir := os.Getenv(env); dir != "" {
		return Root{Dir: dir}, nil
	}
	repo, err := Repo()
	if err != nil {
		return Root{}, err
	}
	if dir := filepath.Join(repo, shared); exists(dir) {
		return Root{Dir: dir, Shared: true}, nil
	}
	dir := filepath.Join(repo, copy)
	if !exists(dir) {
		return Root{}, fmt.Errorf("neither %s nor %s exists", filepath.Join(repo, shared), dir)
	}
	return Root{Dir: dir}, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Conformance returns the conformance cases (ort/..., onnx-pytorch/...):
// $IPU_CONFORMANCE, ../shared/conformance, or testdata/conformance.
func Conformance() (Root, error) {
	return find("IPU_CONFORMANCE", filepath.Join("..", "shared", "conformance"), filepath.Join("testdata", "conformance"))
}

// Models returns the shared model cases (bert_layer, torch_*...):
// $IPU_MODELS, ../shared/models, or testdata/models/shared.
func Models() (Root, error) {
	return find("IPU_MODELS", filepath.Join("..", "shared", "models"), filepath.Join("testdata", "models", "shared"))
}

// SeedLog returns the seed log: $IPU_SEED_LOG,
// ../shared/seed/000_ad3fbe4381067c88.txt, or its copy under
// testdata/seed.
func SeedLog() (Root, error) {
	const name = "000_ad3fbe4381067c88.txt"
	return find("IPU_SEED_LOG", filepath.Join("..", "shared", "seed", name), filepath.Join("testdata", "seed", name))
}
