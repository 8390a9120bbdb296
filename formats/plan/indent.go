package plan

import "bytes"

// indent appends to dst the compact JSON src indented as
// json.Indent(dst, src, "", " ") does: a newline and one space a level
// before every element and closing bracket of a non-empty object or
// array, a space after every colon. It copies strings whole (a plan's
// constants are megabytes of base64 in a few strings), where json.Indent
// steps its scanner through every byte. src must be valid compact JSON
// (encoding/json's own output).
func indent(dst, src []byte) []byte {
	depth := 0
	open := false // the last byte opened an object or array
	newline := func() {
		dst = append(dst, '\n')
		for range depth {
			dst = append(dst, ' ')
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if open && c != ']' && c != '}' {
			open = false
			depth++
			newline()
		}
		switch c {
		case '"':
			end := stringEnd(src, i)
			dst = append(dst, src[i:end]...)
			i = end - 1
		case '{', '[':
			dst = append(dst, c)
			open = true
		case ',':
			dst = append(dst, c)
			newline()
		case ':':
			dst = append(dst, c, ' ')
		case '}', ']':
			if open {
				open = false // an empty one stays on its line
			} else {
				depth--
				newline()
			}
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// stringEnd returns the index past the closing quote of the JSON string
// that starts at src[i].
func stringEnd(src []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(src[j:], '"')
		if k < 0 {
			return len(src)
		}
		j += k
		// The quote closes the string unless an odd run of backslashes
		// escapes it.
		n := 0
		for b := j - 1; b > i && src[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}
