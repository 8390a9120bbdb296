package planner

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"

	"ipu.local/formats/plan"
)

// A sharded search (Options.Shards > 1) runs Shards independent walks
// from the same analytic start, shard I drawing from the seed's PCG
// stream jumped I x 2^64 draws ahead. The PCG's period is 2^128, so the
// shards' streams do not overlap for their first 2^64 draws each: no
// two shards make the same sequence of moves, and a shard's search is
// exactly a plain search whose generator starts elsewhere (shard 0 is
// the unsharded stream). ipu-plan --merge then keeps the best validated
// incumbent.

// The 128-bit LCG of math/rand/v2's PCG: state = state x mul + inc.
// TestJumpPCG checks them against the generator itself.
var (
	pcgMul = u128{2549297995355413924, 4865540595714422341}
	pcgInc = u128{6364136223846793005, 1442695040888963407}
)

type u128 struct{ hi, lo uint64 }

func (a u128) mul(b u128) u128 {
	hi, lo := bits.Mul64(a.lo, b.lo)
	hi += a.hi*b.lo + a.lo*b.hi
	return u128{hi, lo}
}

func (a u128) add(b u128) u128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, c)
	return u128{hi, lo}
}

// jumpPCG advances p by delta draws in O(log delta) steps (Brown,
// "Random number generation with arbitrary strides", 1994).
func jumpPCG(p *rand.PCG, delta u128) error {
	b, err := p.MarshalBinary()
	if err != nil || len(b) != 20 {
		return fmt.Errorf("pcg state of %d bytes", len(b))
	}
	state := u128{binary.BigEndian.Uint64(b[4:]), binary.BigEndian.Uint64(b[12:])}
	accMul, accAdd := u128{0, 1}, u128{}
	curMul, curAdd := pcgMul, pcgInc
	for i := 0; i < 128; i++ {
		word := delta.lo
		if i >= 64 {
			word = delta.hi
		}
		if word>>(i%64)&1 == 1 {
			accMul = accMul.mul(curMul)
			accAdd = accAdd.mul(curMul).add(curAdd)
		}
		curAdd = curMul.add(u128{0, 1}).mul(curAdd)
		curMul = curMul.mul(curMul)
	}
	state = accMul.mul(state).add(accAdd)
	b = b[:4]
	b = binary.BigEndian.AppendUint64(b, state.hi)
	b = binary.BigEndian.AppendUint64(b, state.lo)
	return p.UnmarshalBinary(b)
}

// checkShard validates a shard selection: 0 of 0 (unsharded) or I of N
// with 0 <= I < N <= plan.MaxShards.
func checkShard(shard, shards int) error {
	if shards == 0 && shard == 0 {
		return nil
	}
	if shards < 1 || shards > plan.MaxShards || shard < 0 || shard >= shards {
		return fmt.Errorf("shard %d of %d is not one of [0, N) with N in [1, %d]", shard, shards, plan.MaxShards)
	}
	return nil
}

// newState is the state of a fresh search: the seed's generator, jumped
// to the shard's stream.
func newState(opt Options, arch string, tiles int) (*plan.State, error) {
	s := plan.NewState(opt.ModelFingerprint, arch, tiles, opt.Seed)
	s.Objective = plan.ObjectiveOf(opt.Objective)
	s.Reserve = opt.MemoryReserve
	s.MaxVariable = opt.MaxVariable
	if opt.Shards <= 1 {
		return s, nil
	}
	s.Shard, s.Shards = opt.Shard, opt.Shards
	pcg, err := s.PCG()
	if err != nil {
		return nil, err
	}
	// Shard I starts I x 2^64 draws ahead: bit 64 of the jump is I's bit 0.
	if err := jumpPCG(pcg, u128{hi: uint64(opt.Shard)}); err != nil {
		return nil, err
	}
	s.SetPCG(pcg)
	return s, nil
}

// shardOf normalizes a state's or the options' shard: 0 of 1 is a plain
// search.
func shardOf(shard, shards int) (int, int) {
	if shards <= 1 {
		return 0, 0
	}
	return shard, shards
}
