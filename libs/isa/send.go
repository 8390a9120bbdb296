package isa

// A send's operands: d names its destination tiles (the first in the low
// 16 bits, their count in the high 16, 0 meaning 1) and b its word count
// (the low SendWordBits bits) and the distance from one destination tile
// to the next (the bits above, 0 meaning 1: consecutive tiles). A strided
// multicast reaches tiles that are not neighbours, as the copies of a
// block along the second axis of a grid of tiles are, with one send
// instead of one per tile.

// SendWordBits is the width of a send's word count in its b operand.
const SendWordBits = 18

// MaxSendWords is the most words one send moves.
const MaxSendWords = 1<<SendWordBits - 1

// MaxSendStride is the largest destination stride a send encodes.
const MaxSendStride = 1<<(32-SendWordBits) - 1

// SendCount returns a send's b operand for words to every stride-th tile
// (stride 0 or 1: consecutive tiles). The caller keeps words and stride
// within MaxSendWords and MaxSendStride.
func SendCount(words, stride int) uint32 {
	if stride <= 1 {
		return uint32(words)
	}
	return uint32(words) | uint32(stride)<<SendWordBits
}

// SendWords returns the word count of a send's b operand.
func SendWords(b uint32) uint32 { return b & MaxSendWords }

// SendStride returns the destination stride of a send's b operand (at
// least 1).
func SendStride(b uint32) uint32 { return max(b>>SendWordBits, 1) }
