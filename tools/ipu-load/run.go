package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"ipu.local/formats/ipuexe"
	"ipu.local/libs/artdiff"
	"ipu.local/libs/device"
	"ipu.local/libs/pack"
	"ipu.local/libs/par"
	"ipu.local/libs/toolrun"
	"ipu.local/libs/trace"
	"ipu.local/tools/internal/progress"
)

// crashEnv names a debug hook for tests: IPU_LOAD_CRASH_AFTER=images makes
// ipu-load exit with status 3 right after the tile images are written and
// before the device is marked loaded, as if it had been killed there.
const crashEnv = "IPU_LOAD_CRASH_AFTER"

// heapPerPackageByte is the loader's heap a package byte, about (the
// BERT-base FP16 layer's 40 MB package: 560 MB with the device's pages).
const heapPerPackageByte = 14

func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "ipu-load",
		Usage:     "load an application package onto an IPU device",
		ArgsUsage: "IN.ipuexe",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "device", Usage: "device `PATH` (created when missing)", Required: true},
			&cli.StringFlag{Name: "lock", Usage: "hardware ownership lock `FILE` (default: DEV.lock)"},
			&cli.DurationFlag{Name: "lock-timeout", Usage: "how long to wait for hardware ownership", Value: 10 * time.Second},
			&cli.StringFlag{Name: "progress", Usage: "a progress bar of the tile writes: `auto` (when stderr is a terminal), always or never", Value: progress.Auto},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return toolrun.Usagef("want exactly one package IN.ipuexe, got %d arguments", c.NArg())
			}
			if err := progress.Check(c.String("progress")); err != nil {
				return toolrun.Usagef("%v", err)
			}
			if c.Duration("lock-timeout") < 0 {
				return toolrun.Usagef("--lock-timeout %s: must not be negative", c.Duration("lock-timeout"))
			}
			lock := c.String("lock")
			if lock == "" {
				lock = device.LockPath(c.String("device"))
			}
			return load(c, c.Args().First(), c.String("device"), lock, c.Duration("lock-timeout"), os.Getenv(crashEnv))
		},
	}
	app.Metadata = map[string]any{toolrun.HeapPerInputKey: int64(heapPerPackageByte)}
	return toolrun.Main(app, args, stdout, stderr)
}

// load reads the package, takes the hardware and loads it.
func load(c *cli.Context, in, dev, lockPath string, timeout time.Duration, crashAfter string) error {
	log := toolrun.Logger(c)

	log.Info("reading application package")
	data, err := os.ReadFile(in)
	if err != nil {
		return fmt.Errorf("read package: %w", err)
	}
	if err := artdiff.NotKind(data, "package"); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	toolrun.ExpectHeap(heapPerPackageByte * int64(len(data)))
	hash := par.Background(func() string { return ipuexe.Fingerprint(data) })
	// Decompression is bounded by the memory of the package's architecture.
	pkg, err := ipuexe.ReadWith(data, ipuexe.ReadOptions{Limits: pack.Limits})
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	fingerprint := hash()
	// The host model (ipu-check's reference) shares the file's bytes;
	// loading needs neither, so the collector may take both back.
	pkg.Host.Model = nil
	log.Info("application package read", "tiles", pkg.Tiles, trace.Bare("compiler", pkg.Compiler))

	// A simulated device is created on first use, like its directory.
	if err := os.MkdirAll(filepath.Dir(dev), 0o755); err != nil {
		return fmt.Errorf("device %s: %w", dev, err)
	}
	lock, err := device.Acquire(lockPath, timeout, log)
	if err != nil {
		return err
	}
	defer lock.Release()

	d, err := device.Attach(dev, pkg.Arch, log)
	if err != nil {
		return err
	}
	defer d.Close()

	bar := progress.New(c.String("progress"), c.App.ErrWriter, 100, "tile images")
	defer bar.Finish()
	opt := device.LoadOptions{Progress: func(done, total int) {
		bar.Set(done*100/max(total, 1), fmt.Sprintf("tile images %d/%d", done, total))
	}}
	switch crashAfter {
	case "":
	case "images":
		opt.AfterImages = func() { os.Exit(3) }
	default:
		return fmt.Errorf("%s=%q: the only crash point is \"images\"", crashEnv, crashAfter)
	}
	if err := d.Load(pkg, fingerprint, log, opt); err != nil {
		return err
	}
	return d.Close()
}
