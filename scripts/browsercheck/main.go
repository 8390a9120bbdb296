// Command browsercheck loads an ipu-report page in headless chromium and
// checks that it rendered:
//
//	browsercheck [-max-load 2s] DIR
//
// The page must render with JavaScript disabled, so it may hold no
// script. It loads DIR/index.html: it writes DIR/screenshot.png (1280 px
// wide) and checks that the screenshot decodes with a non-zero size and
// that the dumped DOM has a title. Then a copy of the page with a small probe
// script (DIR/.browsercheck.html, removed afterwards) reports what the
// browser made of it: every image must have decoded with a non-zero
// natural size, no resource may have failed to load, and the load must
// take less than -max-load.
//
// Without a chromium binary (chromium, chromium-browser, google-chrome
// on PATH, or $CHROMIUM) it prints that it skipped and exits 0.
// Problems are one line on stderr and exit status 1.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "browsercheck: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
}

func findChromium() string {
	if c := os.Getenv("CHROMIUM"); c != "" {
		p, _ := exec.LookPath(c)
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// probe runs in the copy of the page: it records resource errors as
// they happen and, at the load event, every image's natural size and
// the load time, into a <pre id="browsercheck"> that --dump-dom shows.
const probe = `<script>
var bcErrors = [];
window.addEventListener("error", function (e) {
  var t = e.target || {};
  bcErrors.push((t.tagName || "window") + " " + (t.src || t.href || e.message || "").slice(0, 80));
}, true);
window.addEventListener("load", function () {
  var ms = performance.now();
  var imgs = [];
  document.querySelectorAll("img").forEach(function (i) {
    imgs.push({src: i.src.slice(0, 40), w: i.naturalWidth, h: i.naturalHeight, complete: i.complete});
  });
  var pre = document.createElement("pre");
  pre.id = "browsercheck";
  pre.textContent = JSON.stringify({loadMs: ms, images: imgs, errors: bcErrors, title: document.title});
  document.body.appendChild(pre);
});
</script>`

type result struct {
	LoadMs float64 `json:"loadMs"`
	Images []struct {
		Src      string `json:"src"`
		W        int    `json:"w"`
		H        int    `json:"h"`
		Complete bool   `json:"complete"`
	} `json:"images"`
	Errors []string `json:"errors"`
	Title  string   `json:"title"`
}

func run() error {
	maxLoad := flag.Duration("max-load", 2*time.Second, "longest page load accepted")
	flag.Parse()
	if flag.NArg() != 1 {
		return errors.New("usage: browsercheck [-max-load D] DIR")
	}
	dir, err := filepath.Abs(flag.Arg(0))
	if err != nil {
		return err
	}
	page := filepath.Join(dir, "index.html")
	src, err := os.ReadFile(page)
	if err != nil {
		return err
	}
	chromium := findChromium()
	if chromium == "" {
		fmt.Println("browsercheck: skipped: no chromium installed")
		return nil
	}
	profileDir, err := os.MkdirTemp("", "browsercheck-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profileDir)
	browse := func(extra ...string) ([]byte, error) {
		args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
			"--no-first-run", "--disable-extensions", "--user-data-dir=" + profileDir, "--window-size=1280,2400"}, extra...)
		cmd := exec.Command(chromium, args...)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				return nil, fmt.Errorf("%s: %v: %s", filepath.Base(chromium), err, lastLine(stderr.String()))
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-done
			return nil, fmt.Errorf("%s: no result in 60 s", filepath.Base(chromium))
		}
		return out.Bytes(), nil
	}
	url := "file://" + page

	// The page as users see it. It must render without JavaScript: it
	// has no script at all (chromium's headless modes stop working with
	// --blink-settings=scriptEnabled=false, so that is what is checked).
	if bytes.Contains(bytes.ToLower(src), []byte("<script")) {
		return fmt.Errorf("%s: has a script; it must render with JavaScript disabled", page)
	}
	shot := filepath.Join(dir, "screenshot.png")
	os.Remove(shot)
	if _, err := browse("--screenshot="+shot, url); err != nil {
		return err
	}
	f, err := os.Open(shot)
	if err != nil {
		return fmt.Errorf("no screenshot: %v", err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %v", shot, err)
	}
	if b := img.Bounds(); b.Dx() == 0 || b.Dy() == 0 {
		return fmt.Errorf("%s: empty screenshot", shot)
	}
	dom, err := browse("--dump-dom", url)
	if err != nil {
		return err
	}
	m := regexp.MustCompile(`<title>([^<]+)</title>`).FindSubmatch(dom)
	if m == nil || strings.TrimSpace(string(m[1])) == "" {
		return fmt.Errorf("%s: the rendered page has no title", page)
	}

	// The probe's copy, beside the page so that relative references resolve.
	probePage := filepath.Join(dir, ".browsercheck.html")
	withProbe := strings.Replace(string(src), "<head>", "<head>\n"+probe, 1)
	if withProbe == string(src) {
		return fmt.Errorf("%s: no <head>", page)
	}
	if err := os.WriteFile(probePage, []byte(withProbe), 0o644); err != nil {
		return err
	}
	defer os.Remove(probePage)
	dom, err = browse("--dump-dom", "file://"+probePage)
	if err != nil {
		return err
	}
	m = regexp.MustCompile(`(?s)<pre id="browsercheck">(.*?)</pre>`).FindSubmatch(dom)
	if m == nil {
		return fmt.Errorf("%s: the probe did not report (no load event?)", page)
	}
	var r result
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &r); err != nil {
		return fmt.Errorf("probe report: %v", err)
	}
	if len(r.Errors) > 0 {
		return fmt.Errorf("%s: %d resources failed to load, first %s", page, len(r.Errors), r.Errors[0])
	}
	if len(r.Images) == 0 {
		return fmt.Errorf("%s: no image", page)
	}
	for _, im := range r.Images {
		if !im.Complete || im.W == 0 || im.H == 0 {
			return fmt.Errorf("%s: image %s... not decoded (%dx%d)", page, im.Src, im.W, im.H)
		}
	}
	load := time.Duration(r.LoadMs * float64(time.Millisecond))
	if load > *maxLoad {
		return fmt.Errorf("%s: loaded in %v, more than %v", page, load.Round(time.Millisecond), *maxLoad)
	}
	sb := img.Bounds()
	fmt.Printf("browsercheck: %s: title %q, %d images decoded, no failed resource, loaded in %v; screenshot %s %dx%d\n",
		page, r.Title, len(r.Images), load.Round(time.Millisecond), shot, sb.Dx(), sb.Dy())
	return nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
