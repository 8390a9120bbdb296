package progress

import (
	"bytes"
	"strings"
	"testing"
)

func TestBar(t *testing.T) {
	var buf bytes.Buffer
	b := New(Always, &buf, 20, "search")
	b.Set(9, "search best 1508")
	b.Set(25, "ok") // past the total: drawn full
	lines := strings.Split(buf.String(), "\r")
	want := []string{
		"",
		"search   0% [                              ] (0/20)",
		"search best 1508  45% [=============                 ] (9/20)",
		"ok 100% [==============================] (20/20)" + strings.Repeat(" ", 13),
	}
	if len(lines) != len(want) {
		t.Fatalf("drew %q, want %q", lines, want)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, lines[i], want[i])
		}
	}
	buf.Reset()
	b.Finish()
	if got := buf.String(); got != "\r"+strings.Repeat(" ", 48)+"\r" {
		t.Errorf("Finish drew %q, want the line cleared", got)
	}
}

func TestBarDisabled(t *testing.T) {
	var buf bytes.Buffer
	for _, mode := range []string{Never, Auto} { // a buffer is no terminal
		b := New(mode, &buf, 10, "x")
		b.Set(3, "y")
		b.Finish()
	}
	if buf.Len() != 0 {
		t.Errorf("a disabled bar drew %q", buf.String())
	}
	if err := Check("sometimes"); err == nil {
		t.Error("Check accepted --progress sometimes")
	}
}
