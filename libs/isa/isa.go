// Package isa defines the tile instruction set: one table of every
// instruction (mnemonic, encoding, operands, cycles, semantics), and the
// encoder and decoder built from it.
//
// # Machine state of one context
//
// Every context (6 workers and 1 supervisor per tile) has 16 integer and
// address registers $m0..$m15 and 16 arithmetic registers $a0..$a15, all 32
// bits. $m15 and $a15 read as zero and ignore writes ($mzero, $azero).
// Arithmetic registers pair up for 64-bit values ($a0:1, even first
// register) and group in fours for 128-bit values ($a0:3, first register a
// multiple of 4). A 64-bit value holds f32v2 (two FP32, low register first)
// or f16v4 (four FP16, lowest half first, little-endian). Each worker has
// an AMP accumulator of 4x16 FP32 values (amph, ampq, ampf add to it). Control registers are read and
// written with get and put (see CSR).
//
// # Encoding
//
// Every instruction is one little-endian 32-bit word:
//
//	31      24 23  20 19  16 15  12 11   8 7       0
//	[ opcode ] [ d  ] [ a  ] [ b  ] [ c  ] [ imm8   ]   form R
//	[ opcode ] [ d  ] [ a  ] [     imm16 (signed)   ]   form I
//	[ opcode ] [ d  ] [          imm20              ]   form J
//
// Fields an instruction does not use must be zero; anything else is an
// invalid instruction. Branch offsets count instructions from the
// instruction after the branch.
//
// # Timing
//
// Contexts issue round-robin over 6 slots: cycle t belongs to slot t mod 6.
// Worker w issues only in slot w; the supervisor issues in any cycle whose
// slot runs no worker. A context issues at most once every 6 cycles; an
// instruction of Cycles n delays that context's next issue by 6n cycles.
// When two operands of one instruction touch the same 16 KiB memory
// element, the instruction costs one more cycle.
package isa

import (
	"fmt"
)

// Form is the bit layout of an instruction word.
type Form uint8

const (
	FormR Form = iota // d, a, b, c registers and imm8
	FormI             // d, a registers and signed imm16
	FormJ             // d register and imm20
)

// Kind says what one assembly operand is and which field holds it.
type Kind uint8

const (
	MD     Kind = iota + 1 // $m register in field d
	MA                     // $m register in field a
	MB                     // $m register in field b
	MC                     // $m register in field c
	AD                     // $a register in field d
	AA                     // $a register in field a
	AB                     // $a register in field b
	AC                     // $a register in field c
	AD2                    // $a pair (even) in field d
	AA2                    // $a pair in field a
	AB2                    // $a pair in field b
	AC2                    // $a pair in field c
	AD4                    // $a quad (multiple of 4) in field d
	Imm8                   // unsigned imm8
	Imm16                  // signed imm16
	Imm16U                 // unsigned imm16 (written as 0..65535)
	Imm20                  // unsigned imm20
	Rel16                  // branch target, signed imm16 instruction offset
	Rel20                  // branch target, signed imm20 instruction offset
	MemOff                 // [$mA+imm16]: base in field a, signed byte offset in imm16
	MemInc                 // [$mA+=imm16]: base in field a, post-increment by imm16
	CSRImm                 // control register number in imm8
)

// Class groups instructions for the simulator and the cost model.
type Class uint8

const (
	ClassALU Class = iota
	ClassBranch
	ClassLoad
	ClassStore
	ClassFloat
	ClassConvert
	ClassAMP
	ClassControl
	ClassExchange
	ClassHost
)

// Who may execute an instruction.
type Who uint8

const (
	Any        Who = iota
	Supervisor     // supervisor context only
	Worker         // worker contexts only
)

// Op is an opcode.
type Op uint8

// Info describes one instruction.
type Info struct {
	Op       Op
	Name     string
	Form     Form
	Operands []Kind
	Cycles   int // issue slots of the executing context
	Class    Class
	Who      Who
	Doc      string // semantics
}

// Opcodes. The numbering is the encoding; do not reorder.
const (
	NOP Op = 0x00

	// Integer and address arithmetic and logic.
	ADD    Op = 0x01
	SUB    Op = 0x02
	MUL    Op = 0x03
	AND    Op = 0x04
	OR     Op = 0x05
	XOR    Op = 0x06
	SHL    Op = 0x07
	SHR    Op = 0x08
	SAR    Op = 0x09
	CMPEQ  Op = 0x0A
	CMPLT  Op = 0x0B
	CMPULT Op = 0x0C
	MIN    Op = 0x0D
	MAX    Op = 0x0E
	ADDI   Op = 0x10
	ANDI   Op = 0x11
	ORI    Op = 0x12
	XORI   Op = 0x13
	SHLI   Op = 0x14
	SHRI   Op = 0x15
	SARI   Op = 0x16
	MULI   Op = 0x17
	CMPEQI Op = 0x18
	CMPLTI Op = 0x19
	LI     Op = 0x1A
	LIH    Op = 0x1B
	// 16-bit halves of two words interleaved (FP16 transposes).
	SORT16LO Op = 0x1C
	SORT16HI Op = 0x1D

	// Control flow.
	BR   Op = 0x20
	BRZ  Op = 0x21
	BRNZ Op = 0x22
	CALL Op = 0x23
	JR   Op = 0x24
	RPT  Op = 0x25
	RPTI Op = 0x26

	// Loads and stores.
	LDM    Op = 0x30
	STM    Op = 0x31
	LDMP   Op = 0x32
	STMP   Op = 0x33
	LD32   Op = 0x34
	ST32   Op = 0x35
	LD64   Op = 0x36
	ST64   Op = 0x37
	LD128  Op = 0x38
	ST128  Op = 0x39
	LD32P  Op = 0x3A
	ST32P  Op = 0x3B
	LD64P  Op = 0x3C
	ST64P  Op = 0x3D
	LD128P Op = 0x3E
	ST128P Op = 0x3F

	// Register moves.
	MTA  Op = 0x40
	MFA  Op = 0x41
	AMOV Op = 0x42
	ALI  Op = 0x43
	ALIH Op = 0x44

	// Scalar FP32.
	FADD   Op = 0x48
	FSUB   Op = 0x49
	FMUL   Op = 0x4A
	FMA    Op = 0x4B
	FMAX   Op = 0x4C
	FMIN   Op = 0x4D
	FCMPLT Op = 0x4E
	FSEL   Op = 0x4F

	// f32v2.
	V2ADD   Op = 0x50
	V2SUB   Op = 0x51
	V2MUL   Op = 0x52
	V2FMA   Op = 0x53
	V2MAX   Op = 0x54
	V2MIN   Op = 0x55
	V2CMPLT Op = 0x56
	V2SEL   Op = 0x57
	V2CMPEQ Op = 0x58

	// f16v4.
	H4ADD   Op = 0x60
	H4SUB   Op = 0x61
	H4MUL   Op = 0x62
	H4FMA   Op = 0x63
	H4MAX   Op = 0x64
	H4MIN   Op = 0x65
	H4CMPLT Op = 0x66
	H4SEL   Op = 0x67
	H4CMPEQ Op = 0x68

	// FP32 functions, one value (f) or a pair (v2).
	FEXP   Op = 0x70
	FLOG   Op = 0x71
	FRCP   Op = 0x72
	FRSQRT Op = 0x73
	FSQRT  Op = 0x74
	FTANH  Op = 0x75
	FERF   Op = 0x76
	FABS   Op = 0x77
	FNEG   Op = 0x78
	V2EXP  Op = 0x79
	V2RCP  Op = 0x7A
	V2ABS  Op = 0x7B
	V2NEG  Op = 0x7C
	FPOW   Op = 0x7D
	FSIN   Op = 0x7E
	FCOS   Op = 0x7F

	// Conversions.
	CVTFH  Op = 0x80 // f32v2 -> f16v2
	CVTHF  Op = 0x81 // f16v2 -> f32v2
	CVTH8  Op = 0x82 // f16v4 -> fp8x4
	CVT8H  Op = 0x83 // fp8x4 -> f16v4
	CVTF8  Op = 0x84 // f32v2 -> fp8x2 (direct, one rounding)
	CVT8F  Op = 0x85 // fp8x2 -> f32v2
	CVTIF  Op = 0x86 // int32 -> f32
	CVTFI  Op = 0x87 // f32 -> int32, toward zero, saturating
	FSUM2  Op = 0x88 // f32v2 horizontal sum
	H4SUMF Op = 0x89 // f16v4 horizontal sum into f32
	CVTF8H Op = 0x8A // f32v2 -> fp8x2 into d's high half (direct, one rounding)

	// AMP matrix-accumulate.
	AMPCLR Op = 0x90
	AMPH   Op = 0x91
	AMPQ   Op = 0x92
	AMPST  Op = 0x93
	AMPLD  Op = 0x94
	AMPF   Op = 0x95

	// Contexts, sync and control registers.
	RUN   Op = 0xA0
	EXIT  Op = 0xA1
	JOIN  Op = 0xA2
	SYNC  Op = 0xA3
	HSYNC Op = 0xA4
	HALT  Op = 0xA5
	GET   Op = 0xA6
	PUT   Op = 0xA7
	DELAY Op = 0xA8

	// Tile-to-tile exchange.
	SEND  Op = 0xB0
	SEND2 Op = 0xB1
	RECV  Op = 0xB2

	// Host exchange.
	HIN  Op = 0xB8
	HOUT Op = 0xB9
)

// CSR numbers for get and put.
const (
	CSRTileID  = 0 // read only: this tile's index
	CSRContext = 1 // read only: 0..5 worker, 6 supervisor
	CSRCycles  = 2 // read only: low 32 bits of the tile cycle counter: cycles since the current superstep began, at the get's issue cycle (the first cycle of a superstep is 0)
	CSRFP8     = 3 // FP8 configuration, see FP8 fields below
	CSRPhase   = 4 // read only: current superstep index
	CSRTiles   = 5 // read only: tiles on the chip
	NumCSR     = 6
)

// Fields of CSRFP8. Formats: 0 E4M3FNUZ, 1 E5M2FNUZ, 2 E4M3FN, 3 E5M2.
// Scales are signed 6-bit: value = fp8 x 2^scale.
const (
	FP8FormatAShift  = 0  // 2 bits: format of operand A and of cvt
	FP8FormatBShift  = 2  // 2 bits: format of AMP operand B
	FP8ScaleAShift   = 4  // 6 bits, signed
	FP8ScaleBShift   = 10 // 6 bits, signed
	FP8NaNOnOverflow = 1 << 16
)

// table lists every instruction.
var table = []Info{
	{NOP, "nop", FormJ, nil, 1, ClassALU, Any, "do nothing"},

	{ADD, "add", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = a + b (mod 2^32)"},
	{SUB, "sub", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = a - b"},
	{MUL, "mul", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = low 32 bits of a * b"},
	{AND, "and", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = a & b"},
	{OR, "or", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = a | b"},
	{XOR, "xor", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = a ^ b"},
	{SHL, "shl", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = a << (b & 31)"},
	{SHR, "shr", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = a >> (b & 31), logical"},
	{SAR, "sar", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = a >> (b & 31), arithmetic"},
	{CMPEQ, "cmpeq", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = a == b ? 1 : 0"},
	{CMPLT, "cmplt", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = int32(a) < int32(b) ? 1 : 0"},
	{CMPULT, "cmpult", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = a < b (unsigned) ? 1 : 0"},
	{MIN, "min", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = min(int32(a), int32(b))"},
	{MAX, "max", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = max(int32(a), int32(b))"},
	{ADDI, "addi", FormI, []Kind{MD, MA, Imm16}, 1, ClassALU, Any, "d = a + sext(imm16)"},
	{ANDI, "andi", FormI, []Kind{MD, MA, Imm16U}, 1, ClassALU, Any, "d = a & zext(imm16)"},
	{ORI, "ori", FormI, []Kind{MD, MA, Imm16U}, 1, ClassALU, Any, "d = a | zext(imm16)"},
	{XORI, "xori", FormI, []Kind{MD, MA, Imm16U}, 1, ClassALU, Any, "d = a ^ zext(imm16)"},
	{SHLI, "shli", FormI, []Kind{MD, MA, Imm16U}, 1, ClassALU, Any, "d = a << (imm16 & 31)"},
	{SHRI, "shri", FormI, []Kind{MD, MA, Imm16U}, 1, ClassALU, Any, "d = a >> (imm16 & 31), logical"},
	{SARI, "sari", FormI, []Kind{MD, MA, Imm16U}, 1, ClassALU, Any, "d = a >> (imm16 & 31), arithmetic"},
	{MULI, "muli", FormI, []Kind{MD, MA, Imm16}, 1, ClassALU, Any, "d = low 32 bits of a * sext(imm16)"},
	{CMPEQI, "cmpeqi", FormI, []Kind{MD, MA, Imm16}, 1, ClassALU, Any, "d = a == sext(imm16) ? 1 : 0"},
	{CMPLTI, "cmplti", FormI, []Kind{MD, MA, Imm16}, 1, ClassALU, Any, "d = int32(a) < sext(imm16) ? 1 : 0"},
	{LI, "li", FormJ, []Kind{MD, Imm20}, 1, ClassALU, Any, "d = zext(imm20)"},
	{LIH, "lih", FormI, []Kind{MD, Imm16U}, 1, ClassALU, Any, "d = (d & 0xffff) | imm16 << 16"},
	{SORT16LO, "sort16lo", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = (a & 0xffff) | b << 16: the low halves of a and b, a's in the low half"},
	{SORT16HI, "sort16hi", FormR, []Kind{MD, MA, MB}, 1, ClassALU, Any, "d = a >> 16 | (b & 0xffff0000): the high halves of a and b, a's in the low half"},

	{BR, "br", FormJ, []Kind{Rel20}, 1, ClassBranch, Any, "pc = next + 4*imm20"},
	{BRZ, "brz", FormI, []Kind{MA, Rel16}, 1, ClassBranch, Any, "if a == 0: pc = next + 4*imm16"},
	{BRNZ, "brnz", FormI, []Kind{MA, Rel16}, 1, ClassBranch, Any, "if a != 0: pc = next + 4*imm16"},
	{CALL, "call", FormJ, []Kind{MD, Rel20}, 1, ClassBranch, Any, "d = next; pc = next + 4*imm20"},
	{JR, "jr", FormI, []Kind{MA}, 1, ClassBranch, Any, "pc = a"},
	{RPT, "rpt", FormI, []Kind{MA, Imm16U}, 1, ClassBranch, Any,
		"repeat the next imm16 instructions a times with no loop overhead (a == 0 skips them); loops do not nest and the body may not branch"},
	{RPTI, "rpti", FormJ, []Kind{Imm20}, 1, ClassBranch, Any,
		"rpti count<<8|len: repeat the next len (imm20 & 0xff) instructions imm20>>8 times, as rpt"},

	{LDM, "ldm", FormI, []Kind{MD, MemOff}, 1, ClassLoad, Any, "d = mem32[a + sext(imm16)]"},
	{STM, "stm", FormI, []Kind{MD, MemOff}, 1, ClassStore, Any, "mem32[a + sext(imm16)] = d"},
	{LDMP, "ldm", FormI, []Kind{MD, MemInc}, 1, ClassLoad, Any, "d = mem32[a]; a += sext(imm16)"},
	{STMP, "stm", FormI, []Kind{MD, MemInc}, 1, ClassStore, Any, "mem32[a] = d; a += sext(imm16)"},
	{LD32, "ld32", FormI, []Kind{AD, MemOff}, 1, ClassLoad, Any, "$a d = mem32[a + sext(imm16)]"},
	{ST32, "st32", FormI, []Kind{AD, MemOff}, 1, ClassStore, Any, "mem32[a + sext(imm16)] = $a d"},
	{LD64, "ld64", FormI, []Kind{AD2, MemOff}, 1, ClassLoad, Any, "$a d:d+1 = mem64[a + sext(imm16)]"},
	{ST64, "st64", FormI, []Kind{AD2, MemOff}, 1, ClassStore, Any, "mem64[a + sext(imm16)] = $a d:d+1"},
	{LD128, "ld128", FormI, []Kind{AD4, MemOff}, 1, ClassLoad, Any, "$a d:d+3 = mem128[a + sext(imm16)]; interleaved memory only"},
	{ST128, "st128", FormI, []Kind{AD4, MemOff}, 1, ClassStore, Any, "mem128[a + sext(imm16)] = $a d:d+3; interleaved memory only"},
	{LD32P, "ld32", FormI, []Kind{AD, MemInc}, 1, ClassLoad, Any, "$a d = mem32[a]; a += sext(imm16)"},
	{ST32P, "st32", FormI, []Kind{AD, MemInc}, 1, ClassStore, Any, "mem32[a] = $a d; a += sext(imm16)"},
	{LD64P, "ld64", FormI, []Kind{AD2, MemInc}, 1, ClassLoad, Any, "$a d:d+1 = mem64[a]; a += sext(imm16)"},
	{ST64P, "st64", FormI, []Kind{AD2, MemInc}, 1, ClassStore, Any, "mem64[a] = $a d:d+1; a += sext(imm16)"},
	{LD128P, "ld128", FormI, []Kind{AD4, MemInc}, 1, ClassLoad, Any, "$a d:d+3 = mem128[a]; a += sext(imm16); interleaved memory only"},
	{ST128P, "st128", FormI, []Kind{AD4, MemInc}, 1, ClassStore, Any, "mem128[a] = $a d:d+3; a += sext(imm16); interleaved memory only"},

	{MTA, "mta", FormR, []Kind{AD, MA}, 1, ClassALU, Any, "$a d = $m a (bits)"},
	{MFA, "mfa", FormR, []Kind{MD, AA}, 1, ClassALU, Any, "$m d = $a a (bits)"},
	{AMOV, "amov", FormR, []Kind{AD, AA}, 1, ClassALU, Any, "$a d = $a a"},
	{ALI, "ali", FormJ, []Kind{AD, Imm20}, 1, ClassALU, Any, "$a d = zext(imm20)"},
	{ALIH, "alih", FormI, []Kind{AD, Imm16U}, 1, ClassALU, Any, "$a d = ($a d & 0xffff) | imm16 << 16"},

	{FADD, "f32add", FormR, []Kind{AD, AA, AB}, 1, ClassFloat, Any, "d = a + b, FP32, round to nearest even"},
	{FSUB, "f32sub", FormR, []Kind{AD, AA, AB}, 1, ClassFloat, Any, "d = a - b, FP32"},
	{FMUL, "f32mul", FormR, []Kind{AD, AA, AB}, 1, ClassFloat, Any, "d = a * b, FP32"},
	{FMA, "f32fma", FormR, []Kind{AD, AA, AB}, 1, ClassFloat, Any, "d = d + a * b, FP32, one rounding"},
	{FMAX, "f32max", FormR, []Kind{AD, AA, AB}, 1, ClassFloat, Any, "d = max(a, b); NaN if either is NaN"},
	{FMIN, "f32min", FormR, []Kind{AD, AA, AB}, 1, ClassFloat, Any, "d = min(a, b); NaN if either is NaN"},
	{FCMPLT, "f32cmplt", FormR, []Kind{AD, AA, AB}, 1, ClassFloat, Any, "d = a < b ? 0xffffffff : 0"},
	{FSEL, "f32sel", FormR, []Kind{AD, AA, AB, AC}, 1, ClassFloat, Any, "d = a != 0 ? b : c (bits)"},

	{V2ADD, "f32v2add", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = a + b per lane, FP32"},
	{V2SUB, "f32v2sub", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = a - b per lane"},
	{V2MUL, "f32v2mul", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = a * b per lane"},
	{V2FMA, "f32v2fma", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = d + a * b per lane, one rounding"},
	{V2MAX, "f32v2max", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = max(a, b) per lane"},
	{V2MIN, "f32v2min", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = min(a, b) per lane"},
	{V2CMPLT, "f32v2cmplt", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = a < b ? all ones : 0 per lane"},
	{V2SEL, "f32v2sel", FormR, []Kind{AD2, AA2, AB2, AC2}, 1, ClassFloat, Any, "d = a != 0 ? b : c per lane (bits)"},
	{V2CMPEQ, "f32v2cmpeq", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = a == b ? all ones : 0 per lane"},

	{H4ADD, "f16v4add", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = a + b per lane, FP16, round to nearest even"},
	{H4SUB, "f16v4sub", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = a - b per lane, FP16"},
	{H4MUL, "f16v4mul", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = a * b per lane, FP16"},
	{H4FMA, "f16v4fma", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = d + a * b per lane, FP16, one rounding"},
	{H4MAX, "f16v4max", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = max(a, b) per lane"},
	{H4MIN, "f16v4min", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = min(a, b) per lane"},
	{H4CMPLT, "f16v4cmplt", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = a < b ? 0xffff : 0 per lane"},
	{H4SEL, "f16v4sel", FormR, []Kind{AD2, AA2, AB2, AC2}, 1, ClassFloat, Any, "d = a != 0 ? b : c per 16-bit lane (bits)"},
	{H4CMPEQ, "f16v4cmpeq", FormR, []Kind{AD2, AA2, AB2}, 1, ClassFloat, Any, "d = a == b ? 0xffff : 0 per lane"},

	{FEXP, "f32exp", FormR, []Kind{AD, AA}, 2, ClassFloat, Any, "d = e^a: the FP64 exponential (Go math.Exp) rounded to FP32"},
	{FLOG, "f32log", FormR, []Kind{AD, AA}, 2, ClassFloat, Any, "d = ln a"},
	{FRCP, "f32rcp", FormR, []Kind{AD, AA}, 2, ClassFloat, Any, "d = 1 / a"},
	{FRSQRT, "f32rsqrt", FormR, []Kind{AD, AA}, 2, ClassFloat, Any, "d = 1 / sqrt(a)"},
	{FSQRT, "f32sqrt", FormR, []Kind{AD, AA}, 2, ClassFloat, Any, "d = sqrt(a)"},
	{FTANH, "f32tanh", FormR, []Kind{AD, AA}, 2, ClassFloat, Any, "d = tanh a"},
	{FERF, "f32erf", FormR, []Kind{AD, AA}, 2, ClassFloat, Any, "d = erf a"},
	{FABS, "f32abs", FormR, []Kind{AD, AA}, 1, ClassFloat, Any, "d = |a| (clears the sign bit)"},
	{FNEG, "f32neg", FormR, []Kind{AD, AA}, 1, ClassFloat, Any, "d = -a (flips the sign bit)"},
	{V2EXP, "f32v2exp", FormR, []Kind{AD2, AA2}, 4, ClassFloat, Any, "d = e^a per lane"},
	{V2RCP, "f32v2rcp", FormR, []Kind{AD2, AA2}, 4, ClassFloat, Any, "d = 1 / a per lane"},
	{V2ABS, "f32v2abs", FormR, []Kind{AD2, AA2}, 1, ClassFloat, Any, "d = |a| per lane"},
	{V2NEG, "f32v2neg", FormR, []Kind{AD2, AA2}, 1, ClassFloat, Any, "d = -a per lane"},
	{FPOW, "f32pow", FormR, []Kind{AD, AA, AB}, 4, ClassFloat, Any, "d = a^b, FP32 (from FP64 pow)"},
	{FSIN, "f32sin", FormR, []Kind{AD, AA}, 2, ClassFloat, Any, "d = sin a"},
	{FCOS, "f32cos", FormR, []Kind{AD, AA}, 2, ClassFloat, Any, "d = cos a"},

	{CVTFH, "f32v2tof16", FormR, []Kind{AD, AA2}, 1, ClassConvert, Any, "d = two FP16 (low lane first) from f32v2 a, round to nearest even"},
	{CVTHF, "f16v2tof32", FormR, []Kind{AD2, AA}, 1, ClassConvert, Any, "d = f32v2 from two FP16 in a (exact)"},
	{CVTH8, "f16v4tof8", FormR, []Kind{AD, AA2}, 1, ClassConvert, Any,
		"d = four FP8 (format and scale A of CSR fp8) from f16v4 a divided by 2^scale; round to nearest even; overflow and Inf saturate to +-max, or give NaN (+-Inf for E5M2) when NaN-on-overflow is set, except as onnxruntime: E4M3FN 480 <= |x| < 496 gives +-448 and E5M2 61440 <= |x| < 65536 gives NaN (numfmt.F32ToF8Dev); NaN gives NaN (as ONNX Cast with saturate 1 and 0)"},
	{CVT8H, "f8tof16v4", FormR, []Kind{AD2, AA}, 1, ClassConvert, Any, "d = f16v4 from four FP8 in a, times 2^scale A, round to nearest even"},
	{CVTF8, "f32v2tof8", FormR, []Kind{AD, AA2}, 1, ClassConvert, Any,
		"low 16 bits of d = two FP8 from f32v2 a divided by 2^scale A, one rounding (ONNX Cast); overflow as f16v4tof8; high 16 bits cleared"},
	{CVTF8H, "f32v2tof8hi", FormR, []Kind{AD, AA2}, 1, ClassConvert, Any,
		"high 16 bits of d = two FP8 from f32v2 a, as f32v2tof8; the low 16 bits of d kept (two f32v2tof8 make a word of four FP8 without a move through the integer registers)"},
	{CVT8F, "f8tof32v2", FormR, []Kind{AD2, AA}, 1, ClassConvert, Any, "d = f32v2 from the two FP8 in the low 16 bits of a, times 2^scale A"},
	{CVTIF, "i32tof32", FormR, []Kind{AD, AA}, 1, ClassConvert, Any, "d = FP32 of int32 a, round to nearest even"},
	{CVTFI, "f32toi32", FormR, []Kind{AD, AA}, 1, ClassConvert, Any, "d = int32 of FP32 a toward zero, saturating; NaN gives 0"},
	{FSUM2, "f32v2sum", FormR, []Kind{AD, AA2}, 1, ClassFloat, Any, "d = a.lo + a.hi, FP32"},
	{H4SUMF, "f16v4sum", FormR, []Kind{AD, AA2}, 1, ClassFloat, Any, "d = ((a0 + a1) + a2) + a3 in FP32 (exact lanes, FP32 roundings)"},

	{AMPCLR, "ampclr", FormJ, nil, 1, ClassAMP, Worker, "zero the 4x16 FP32 accumulator"},
	{AMPH, "amph", FormR, []Kind{MA, MB}, 1, ClassAMP, Worker,
		"x = f16[4] at mem64[a] (rows 0..3 of one k), w = f16[16] at mem256[b] (columns 0..15 of that k), acc[i][j] += x[i]*w[j] in FP32 (exact product, one FP32 rounding per add); a += 8; b += 32; b must be 32-aligned in interleaved memory"},
	{AMPQ, "ampq", FormR, []Kind{MA, MB}, 1, ClassAMP, Worker,
		"x = fp8[2][4] at mem64[a] (k, k+1), w = fp8[2][16] at mem256[b], acc[i][j] += (x[0][i]*w[0][j]) * 2^(sa+sb), then += (x[1][i]*w[1][j]) * 2^(sa+sb); formats and scales from CSR fp8; a += 8; b += 32"},
	{AMPST, "ampst", FormR, []Kind{MA, Imm8}, 4, ClassAMP, Worker,
		"store accumulator row imm8 (0..3: 16 FP32, 64 bytes) at a, 16-aligned, interleaved memory"},
	{AMPLD, "ampld", FormR, []Kind{MA, Imm8}, 4, ClassAMP, Worker, "load accumulator row imm8 from 16 FP32 at a, 16-aligned, interleaved memory"},
	{AMPF, "ampf", FormR, []Kind{MA, MB}, 4, ClassAMP, Worker,
		"x = f32[4] at mem128[a] (rows 0..3 of one k), w = f32[16] at mem512[b] (columns 0..15 of that k), acc[i][j] = acc[i][j] + x[i]*w[j] with one FP32 rounding (f32v2fma's); a += 16; b += 64; a must be 8-aligned, b 32-aligned in interleaved memory"},

	{RUN, "run", FormR, []Kind{MA, MB, Imm8}, 1, ClassControl, Supervisor,
		"start worker imm8 (0..5) at pc a with $m0 = b and every other register zero; stalls while that worker runs"},
	{EXIT, "exit", FormJ, nil, 1, ClassControl, Worker, "end this worker"},
	{JOIN, "join", FormJ, nil, 1, ClassControl, Supervisor, "wait until no worker runs"},
	{SYNC, "sync", FormJ, nil, 1, ClassControl, Supervisor,
		"join, then wait for every active tile to reach sync; ends the superstep (costs the preset's sync cycles); received exchange data becomes visible"},
	{HSYNC, "hsync", FormJ, []Kind{MD}, 1, ClassControl, Supervisor,
		"join, then sync with the host: the device stops here until the host invokes a call; d = the call's command word"},
	{HALT, "halt", FormJ, nil, 1, ClassControl, Supervisor, "stop this tile for good"},
	{GET, "get", FormR, []Kind{MD, CSRImm}, 1, ClassControl, Any, "d = csr[imm8]"},
	{PUT, "put", FormR, []Kind{CSRImm, MA}, 1, ClassControl, Any, "csr[imm8] = a (writable registers only)"},
	{DELAY, "delay", FormJ, []Kind{Imm20}, 1, ClassControl, Any, "the next instruction of this context issues imm20 cycles later than it otherwise could"},

	{SEND, "send", FormR, []Kind{MD, MA, MB}, 1, ClassExchange, Supervisor,
		"send w = b&0x3ffff 32-bit words from mem[a..] one per cycle from this cycle on, to the max(d>>16,1) tiles d&0xffff + k*s (s = max(b>>18,1): every s-th tile from d&0xffff; 1, consecutive tiles, when b < 2^18); the send port stays busy for w cycles (a later send stalls)"},
	{SEND2, "send2", FormR, []Kind{MD, MA, MB}, 1, ClassExchange, Supervisor,
		"as send, two words per cycle using both slots of this supertile's bus; the word count b&0x3ffff must be even"},
	{RECV, "recv", FormR, []Kind{MD, MA, MB}, 1, ClassExchange, Supervisor,
		"listen to tile d from this cycle on: one word must arrive in every one of the next b cycles (two for a send2), stored at a.. when the superstep ends"},

	{HIN, "hin", FormR, []Kind{MD, MA, MB}, 1, ClassHost, Supervisor,
		"copy b bytes from host address a (page<<24 | offset) to tile memory d; the host link is shared by all tiles"},
	{HOUT, "hout", FormR, []Kind{MD, MA, MB}, 1, ClassHost, Supervisor,
		"copy b bytes from tile memory a to host address d"},
}

var (
	byOp   [256]*Info
	byName = map[string][]*Info{}
)

func init() {
	for i := range table {
		in := &table[i]
		if byOp[in.Op] != nil {
			panic(fmt.Sprintf("isa: opcode %#x used twice", in.Op))
		}
		byOp[in.Op] = in
		byName[in.Name] = append(byName[in.Name], in)
	}
}

// Table returns every instruction in encoding order.
func Table() []*Info {
	var out []*Info
	for _, in := range byOp {
		if in != nil {
			out = append(out, in)
		}
	}
	return out
}

// Lookup returns the instruction with opcode op, or nil.
func Lookup(op Op) *Info { return byOp[op] }

// ByName returns the instructions spelled name (several when the operand
// kinds tell them apart, as ld64 with [$m+off] and [$m+=inc]).
func ByName(name string) []*Info { return byName[name] }

func (op Op) String() string {
	if in := byOp[op]; in != nil {
		return in.Name
	}
	return fmt.Sprintf("op%#02x", uint8(op))
}
