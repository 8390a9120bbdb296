package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// bareString is a string value printed without quotes in text lines.
type bareString string

// Bare returns an attribute whose string value is printed as is in text
// lines (path=artifacts/x.plan, ranges=[(0, 16)]) instead of quoted. A value
// with control characters or invalid UTF-8 is still quoted so that a line
// stays one line.
func Bare(key, value string) slog.Attr {
	return slog.Any(key, bareString(value))
}

func (h *Handler) appendText(buf []byte, t time.Time, level slog.Level, msg string, fields []slog.Attr) []byte {
	if !t.IsZero() {
		buf = appendTime(buf, t)
		buf = append(buf, ' ')
	}
	buf = appendLevel(buf, level)
	buf = append(buf, ' ')
	for i, s := range h.spans {
		if i > 0 {
			buf = append(buf, ':')
		}
		buf = appendRaw(buf, s.name)
		if hasVisible(s.fields) {
			buf = append(buf, '{')
			first := true
			buf = appendTextAttrs(buf, "", s.fields, &first, true)
			buf = append(buf, '}')
		}
	}
	if len(h.spans) > 0 {
		buf = append(buf, ": "...)
	}
	buf = appendRaw(buf, msg)
	first := false
	buf = appendTextAttrs(buf, "", fields, &first, true)
	return append(buf, '\n')
}

// appendLevel right-aligns the level name to five characters (" INFO").
func appendLevel(buf []byte, level slog.Level) []byte {
	name := level.String()
	for i := len(name); i < 5; i++ {
		buf = append(buf, ' ')
	}
	return append(buf, name...)
}

// hasVisible reports whether attrs print anything: empty attributes and
// empty groups are dropped as slog specifies.
func hasVisible(attrs []slog.Attr) bool {
	for _, a := range attrs {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			if hasVisible(v.Group()) {
				return true
			}
			continue
		}
		if a.Key != "" || !v.Equal(slog.Value{}) {
			return true
		}
	}
	return false
}

// appendTextAttrs writes attrs as key=value separated by single spaces;
// *first tells whether the next pair needs no leading space. Groups
// flatten to dotted keys.
func appendTextAttrs(buf []byte, prefix string, attrs []slog.Attr, first *bool, quoteStrings bool) []byte {
	for _, a := range attrs {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			p := prefix
			if a.Key != "" {
				p = prefix + a.Key + "."
			}
			buf = appendTextAttrs(buf, p, v.Group(), first, quoteStrings)
			continue
		}
		if a.Key == "" && v.Equal(slog.Value{}) {
			continue
		}
		if !*first {
			buf = append(buf, ' ')
		}
		*first = false
		buf = appendRaw(buf, prefix+a.Key)
		buf = append(buf, '=')
		buf = appendTextValue(buf, v, quoteStrings)
	}
	return buf
}

func appendTextValue(buf []byte, v slog.Value, quoteStrings bool) []byte {
	switch v.Kind() {
	case slog.KindString:
		if quoteStrings || needsQuoting(v.String()) {
			return strconv.AppendQuote(buf, v.String())
		}
		return append(buf, v.String()...)
	case slog.KindInt64:
		return strconv.AppendInt(buf, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(buf, v.Uint64(), 10)
	case slog.KindFloat64:
		return strconv.AppendFloat(buf, v.Float64(), 'g', -1, 64)
	case slog.KindBool:
		return strconv.AppendBool(buf, v.Bool())
	case slog.KindDuration:
		return append(buf, v.Duration().String()...)
	case slog.KindTime:
		return v.Time().UTC().AppendFormat(buf, time.RFC3339Nano)
	}
	x := v.Any()
	if b, ok := x.(bareString); ok {
		return appendRaw(buf, string(b))
	}
	s := fmt.Sprint(x)
	if quoteStrings || needsQuoting(s) {
		return strconv.AppendQuote(buf, s)
	}
	return append(buf, s...)
}

// appendRaw writes s unquoted unless it would break the line or the
// encoding, in which case it is quoted.
func appendRaw(buf []byte, s string) []byte {
	if hasControl(s) {
		return strconv.AppendQuote(buf, s)
	}
	return append(buf, s...)
}

func hasControl(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return true
		}
	}
	return false
}

// needsQuoting reports whether a string printed bare would not read back
// as one value: empty, spaces, quotes, '=' or non-printable runes.
func needsQuoting(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if r == ' ' || r == '=' || r == '"' || r == '\\' || !unicode.IsPrint(r) {
			return true
		}
	}
	return false
}

func (h *Handler) appendJSON(buf []byte, t time.Time, level slog.Level, msg string, fields []slog.Attr) []byte {
	buf = append(buf, '{')
	if !t.IsZero() {
		buf = append(buf, `"time":`...)
		buf = appendJSONString(buf, t.UTC().Format(timeLayout))
		buf = append(buf, ',')
	}
	buf = append(buf, `"level":`...)
	buf = appendJSONString(buf, level.String())
	if len(h.spans) > 0 {
		buf = append(buf, `,"spans":[`...)
		for i, s := range h.spans {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, `{"name":`...)
			buf = appendJSONString(buf, s.name)
			buf = append(buf, `,"fields":{`...)
			first := true
			buf = appendJSONAttrs(buf, s.fields, &first)
			buf = append(buf, "}}"...)
		}
		buf = append(buf, ']')
	}
	buf = append(buf, `,"msg":`...)
	buf = appendJSONString(buf, msg)
	first := false
	buf = appendJSONAttrs(buf, fields, &first)
	return append(buf, "}\n"...)
}

func appendJSONAttrs(buf []byte, attrs []slog.Attr, first *bool) []byte {
	for _, a := range attrs {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			if !hasVisible(v.Group()) {
				continue
			}
			if a.Key == "" {
				buf = appendJSONAttrs(buf, v.Group(), first)
				continue
			}
		} else if a.Key == "" && v.Equal(slog.Value{}) {
			continue
		}
		if !*first {
			buf = append(buf, ',')
		}
		*first = false
		buf = appendJSONString(buf, a.Key)
		buf = append(buf, ':')
		buf = appendJSONValue(buf, v)
	}
	return buf
}

func appendJSONValue(buf []byte, v slog.Value) []byte {
	switch v.Kind() {
	case slog.KindGroup:
		buf = append(buf, '{')
		first := true
		buf = appendJSONAttrs(buf, v.Group(), &first)
		return append(buf, '}')
	case slog.KindString:
		return appendJSONString(buf, v.String())
	case slog.KindInt64:
		return strconv.AppendInt(buf, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(buf, v.Uint64(), 10)
	case slog.KindFloat64:
		f := v.Float64()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return appendJSONString(buf, strconv.FormatFloat(f, 'g', -1, 64))
		}
		return strconv.AppendFloat(buf, f, 'g', -1, 64)
	case slog.KindBool:
		return strconv.AppendBool(buf, v.Bool())
	case slog.KindDuration:
		return strconv.AppendInt(buf, int64(v.Duration()), 10)
	case slog.KindTime:
		return appendJSONString(buf, v.Time().UTC().Format(time.RFC3339Nano))
	}
	switch x := v.Any().(type) {
	case bareString:
		return appendJSONString(buf, string(x))
	case error:
		return appendJSONString(buf, x.Error())
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v.Any()); err != nil {
		return appendJSONString(buf, fmt.Sprint(v.Any()))
	}
	return append(buf, bytes.TrimRight(b.Bytes(), "\n")...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string; invalid UTF-8 becomes
// U+FFFD so the line stays valid JSON.
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for _, r := range s {
		switch {
		case r == '"':
			buf = append(buf, `\"`...)
		case r == '\\':
			buf = append(buf, `\\`...)
		case r == '\n':
			buf = append(buf, `\n`...)
		case r == '\r':
			buf = append(buf, `\r`...)
		case r == '\t':
			buf = append(buf, `\t`...)
		case r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029:
			buf = append(buf, `\u`...)
			buf = append(buf, hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		default:
			buf = utf8.AppendRune(buf, r)
		}
	}
	return append(buf, '"')
}
