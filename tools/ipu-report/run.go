package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/formats/profile"
	"ipu.local/libs/arch"
	"ipu.local/libs/artdiff"
	"ipu.local/libs/atomicfile"
	"ipu.local/libs/toolrun"
)

func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "ipu-report",
		Usage:     "write a Perfetto trace, PNG plots and an HTML page from a plan, object and profile",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "plan", Usage: "the plan `FILE` (model.plan)"},
			&cli.StringFlag{Name: "object", Usage: "the object `FILE` (model.ipuobj)"},
			&cli.StringFlag{Name: "profile", Usage: "the profile `FILE` (model.capnp) of ipu-check --profile"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "the report `DIR`", Required: true},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return toolrun.Usagef("unexpected argument %q: the artifacts go with --plan, --object, --profile", c.Args().First())
			}
			if c.String("plan") == "" && c.String("object") == "" && c.String("profile") == "" {
				return toolrun.Usagef("give at least one of --plan, --object, --profile")
			}
			in, err := load(c.String("plan"), c.String("object"), c.String("profile"))
			if err != nil {
				return err
			}
			log := toolrun.Logger(c)
			files, err := writeReport(c.String("output"), in)
			if err != nil {
				return err
			}
			log.Info("report written", "dir", c.String("output"), "files", len(files))
			return nil
		},
	}
	return toolrun.Main(app, args, stdout, stderr)
}

// inputs are the artifacts of one report, read and checked.
type inputs struct {
	planPath, objPath, profPath string
	plan                        *plan.Plan
	obj                         *obj.Object
	prof                        *profile.Profile
	preset                      *arch.Preset
}

func load(planPath, objPath, profPath string) (*inputs, error) {
	in := &inputs{planPath: planPath, objPath: objPath, profPath: profPath}
	var planFP string
	if planPath != "" {
		data, err := os.ReadFile(planPath)
		if err != nil {
			return nil, oneErr(err)
		}
		if err := artdiff.NotKind(data, "plan"); err != nil {
			return nil, fmt.Errorf("%s: %w", planPath, err)
		}
		if in.plan, err = plan.Read(data); err != nil {
			return nil, fmt.Errorf("%s: %w", planPath, err)
		}
		planFP = plan.Fingerprint(data)
	}
	if objPath != "" {
		data, err := os.ReadFile(objPath)
		if err != nil {
			return nil, oneErr(err)
		}
		if err := artdiff.NotKind(data, "object"); err != nil {
			return nil, fmt.Errorf("%s: %w", objPath, err)
		}
		if in.obj, err = obj.Read(data); err != nil {
			return nil, fmt.Errorf("%s: %w", objPath, err)
		}
		if planFP != "" && in.obj.Source != planFP {
			return nil, fmt.Errorf("%s: linked from %.12s, not from %s (%.12s)", objPath, in.obj.Source, planPath, planFP)
		}
	}
	if profPath != "" {
		data, err := os.ReadFile(profPath)
		if err != nil {
			return nil, oneErr(err)
		}
		if err := artdiff.NotKind(data, "profile"); err != nil {
			return nil, fmt.Errorf("%s: %w", profPath, err)
		}
		if in.prof, err = profile.Read(data); err != nil {
			return nil, fmt.Errorf("%s: %w", profPath, err)
		}
	}
	// One architecture for all of them.
	archName, from := "", ""
	for _, a := range []struct{ name, path string }{
		{func() string {
			if in.plan != nil {
				return in.plan.Arch
			}
			return ""
		}(), planPath},
		{func() string {
			if in.obj != nil {
				return in.obj.Arch
			}
			return ""
		}(), objPath},
		{func() string {
			if in.prof != nil {
				return in.prof.Arch
			}
			return ""
		}(), profPath},
	} {
		if a.path == "" {
			continue
		}
		if archName == "" {
			archName, from = a.name, a.path
		} else if a.name != archName {
			return nil, fmt.Errorf("%s: architecture %q, but %s is for %q", a.path, a.name, from, archName)
		}
	}
	p, err := arch.Lookup(archName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	in.preset = p
	if in.prof != nil && in.prof.Tiles != p.Tiles {
		return nil, fmt.Errorf("%s: %d tiles, the %s preset has %d", profPath, in.prof.Tiles, p.Name, p.Tiles)
	}
	if in.obj != nil {
		for _, t := range in.obj.Tiles {
			if t.Index < 0 || t.Index >= p.Tiles {
				return nil, fmt.Errorf("%s: tile %d outside the %d tiles of %s", objPath, t.Index, p.Tiles, p.Name)
			}
		}
		if in.prof != nil {
			if err := checkPhases(in.obj, in.prof); err != nil {
				return nil, fmt.Errorf("%s: %w (of another object than %s?)", profPath, err, objPath)
			}
		}
	}
	return in, nil
}

// checkPhases checks that the profile's named supersteps are phases of
// the object's host program.
func checkPhases(o *obj.Object, p *profile.Profile) error {
	names := map[string]bool{}
	for _, ph := range o.Host.Phases {
		names[ph.Name] = true
	}
	for i, ph := range p.Phases {
		if ph.Name != "" && !names[ph.Name] {
			return fmt.Errorf("phases[%d]: %q is no phase of the object", i, ph.Name)
		}
	}
	return nil
}

// oneErr shortens an *os.PathError to "path: reason".
func oneErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}

// writeReport writes the report into a temporary directory beside dir
// and renames it to dir (replacing an earlier report), so that dir is
// never half-written. It returns the names of the files written.
func writeReport(dir string, in *inputs) ([]string, error) {
	rep, err := build(in)
	if err != nil {
		return nil, err
	}
	files, err := rep.render()
	if err != nil {
		return nil, err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, oneErr(err)
	}
	var tmp string
	forget, err := atomicfile.Create(func() (string, error) {
		var err error
		tmp, err = os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
		return tmp, err
	})
	if err != nil {
		return nil, oneErr(err)
	}
	defer forget()
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, oneErr(err)
	}
	var names []string
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(tmp, f.name), f.data, 0o644); err != nil {
			return nil, oneErr(err)
		}
		names = append(names, f.name)
	}
	if err := atomicfile.Publish(func() error { return replaceDir(tmp, dir) }); err != nil {
		return nil, err
	}
	ok = true
	return names, nil
}

// replaceDir renames the directory tmp to dir, replacing an earlier dir
// (which must be a directory).
func replaceDir(tmp, dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return oneErr(os.Rename(tmp, dir))
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	old := tmp + ".old"
	if err := os.Rename(dir, old); err != nil {
		return oneErr(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.Rename(old, dir)
		return oneErr(err)
	}
	os.RemoveAll(old)
	return nil
}
