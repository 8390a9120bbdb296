package sim

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"

	"ipu.local/libs/arch"
)

// codeIndex shares predecoded programs between tiles with identical code
// (the same ranges holding the same words). A tile's code is found by a
// hash of it and then compared word for word with the program's copy, so
// a look-up reads the tile's code twice and copies nothing; only a new
// program keeps a copy of its words. It is safe for concurrent use.
type codeIndex struct {
	lo   uint32 // the address of mem[0]
	seed maphash.Seed
	mu   sync.Mutex
	m    map[uint64][]*program
}

func newCodeIndex(lo uint32) *codeIndex {
	return &codeIndex{lo: lo, seed: maphash.MakeSeed(), m: map[uint64][]*program{}}
}

// hash hashes code's ranges and their words in mem.
func (x *codeIndex) hash(mem []byte, code []arch.Range) uint64 {
	var h maphash.Hash
	h.SetSeed(x.seed)
	var b [8]byte
	for _, r := range code {
		binary.LittleEndian.PutUint32(b[:], r.Lo)
		binary.LittleEndian.PutUint32(b[4:], r.Hi)
		h.Write(b[:])
		h.Write(mem[r.Lo-x.lo : r.Hi-x.lo])
	}
	return h.Sum64()
}

// same reports whether p was decoded from code's words in mem.
func (x *codeIndex) same(p *program, mem []byte, code []arch.Range) bool {
	if !slices.Equal(p.code, code) {
		return false
	}
	at := 0
	for _, r := range code {
		n := int(r.Size())
		if !bytes.Equal(p.words[at:at+n], mem[r.Lo-x.lo:r.Hi-x.lo]) {
			return false
		}
		at += n
	}
	return true
}

func (x *codeIndex) find(h uint64, mem []byte, code []arch.Range) *program {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range x.m[h] {
		if x.same(p, mem, code) {
			return p
		}
	}
	return nil
}

// get returns the program of code (not empty) in mem, decoding it with
// decode the first time. Two callers may decode the same code at once;
// the first to finish is kept (the programs are equal).
func (x *codeIndex) get(mem []byte, code []arch.Range, decode func() *program) *program {
	h := x.hash(mem, code)
	if p := x.find(h, mem, code); p != nil {
		return p
	}
	p := decode()
	n := 0
	for _, r := range code {
		n += int(r.Size())
	}
	p.words = make([]byte, 0, n)
	for _, r := range code {
		p.words = append(p.words, mem[r.Lo-x.lo:r.Hi-x.lo]...)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, q := range x.m[h] {
		if x.same(q, mem, code) {
			return q
		}
	}
	x.m[h] = append(x.m[h], p)
	return p
}
