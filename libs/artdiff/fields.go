package artdiff

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
)

// leafOptions make byte and number slices single values (a shape is
// "[2 3] -> [2 4]", not a per-element edit script) and nil equal to empty.
// (cmpopts.EquateEmpty would conflict with the comparers; an Ignore
// takes precedence over them.)
var leafOptions = []cmp.Option{
	cmp.Comparer(bytes.Equal),
	cmp.Comparer(slices.Equal[[]int64]),
	cmp.Comparer(slices.Equal[[]uint32]),
	cmp.FilterValues(bothEmpty, cmp.Ignore()),
}

func bothEmpty(x, y any) bool {
	empty := func(v any) bool {
		r := reflect.ValueOf(v)
		return (r.Kind() == reflect.Slice || r.Kind() == reflect.Map) && r.Len() == 0
	}
	return empty(x) && empty(y)
}

// fieldDiffs compares a and b with go-cmp and returns one line per
// differing leaf, "path: old -> new", in field order. Struct fields are
// named in lower case ("dtype"), slice elements and map entries by index
// or key; an element only one side has is "added" or "removed".
func fieldDiffs(a, b any, opts ...cmp.Option) []string {
	r := &leafReporter{}
	cmp.Equal(a, b, append(append(append([]cmp.Option(nil), leafOptions...), opts...), cmp.Reporter(r))...)
	return r.lines
}

// leafReporter is a cmp.Reporter that records the unequal leaves.
type leafReporter struct {
	path  cmp.Path
	lines []string
}

func (r *leafReporter) PushStep(ps cmp.PathStep) { r.path = append(r.path, ps) }
func (r *leafReporter) PopStep()                 { r.path = r.path[:len(r.path)-1] }

func (r *leafReporter) Report(res cmp.Result) {
	if res.Equal() {
		return
	}
	vx, vy := r.path.Last().Values()
	name := pathName(r.path)
	var line string
	switch {
	case !vx.IsValid():
		line = fmt.Sprintf("%s added: %s", name, formatValue(vy))
	case !vy.IsValid():
		line = fmt.Sprintf("%s removed: %s", name, formatValue(vx))
	default:
		line = fmt.Sprintf("%s %s -> %s", name, formatValue(vx), formatValue(vy))
	}
	r.lines = append(r.lines, strings.TrimSpace(line))
}

// pathName spells a path as field names and indices: "shape",
// "phases[2].name". A field is named as in its JSON form when it has a
// json tag ("final_cycles", as a plan file spells it), else in lower case.
func pathName(p cmp.Path) string {
	var b strings.Builder
	for i, s := range p {
		switch s := s.(type) {
		case cmp.StructField:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(fieldName(p[i-1].Type(), s.Name()))
		case cmp.SliceIndex:
			kx, ky := s.SplitKeys()
			k := kx
			if k < 0 {
				k = ky
			}
			fmt.Fprintf(&b, "[%d]", k)
		case cmp.MapIndex:
			fmt.Fprintf(&b, "[%v]", s.Key())
		}
	}
	return b.String()
}

// fieldName is the name of field name of struct type st in a path.
func fieldName(st reflect.Type, name string) string {
	if st.Kind() == reflect.Struct {
		if f, ok := st.FieldByName(name); ok {
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
				return tag
			}
		}
	}
	return strings.ToLower(name)
}

func formatValue(v reflect.Value) string {
	if !v.CanInterface() {
		return "?"
	}
	switch v.Kind() {
	case reflect.String:
		return fmt.Sprintf("%q", v.String())
	case reflect.Uint32: // addresses and offsets
		return fmt.Sprintf("0x%x", v.Uint())
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return fmt.Sprintf("%d bytes", v.Len())
		}
	}
	return fmt.Sprintf("%v", v.Interface())
}
