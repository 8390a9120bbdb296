// Every entry of the instruction table (isa.Table) with boundary operands,
// each line followed by its expected encoding as a comment. The encodings
// were worked out from the bit layouts in libs/isa/isa.go (form R:
// op|d|a|b|c|imm8, form I: op|d|a|imm16, form J: op|d|imm20), not by the
// assembler; TestEncodings assembles the file and compares word by word.
// Branch targets are written as .+N or as absolute addresses; the section
// starts at 0x4c000 so line k (0-based) sits at 0x4c000 + 4k.
.arch ipu21
.equ K, 12
.section text, code, 0x4c000
	nop                                // 00000000
	add $m1, $m2, $m3                  // 01123000
	add $mzero, $mzero, $mzero         // 01fff000
	add $m7, $m10, $m13                // 017ad000
	sub $m1, $m2, $m3                  // 02123000
	sub $mzero, $mzero, $mzero         // 02fff000
	sub $m7, $m10, $m13                // 027ad000
	mul $m1, $m2, $m3                  // 03123000
	mul $mzero, $mzero, $mzero         // 03fff000
	mul $m7, $m10, $m13                // 037ad000
	and $m1, $m2, $m3                  // 04123000
	and $mzero, $mzero, $mzero         // 04fff000
	and $m7, $m10, $m13                // 047ad000
	or $m1, $m2, $m3                   // 05123000
	or $mzero, $mzero, $mzero          // 05fff000
	or $m7, $m10, $m13                 // 057ad000
	xor $m1, $m2, $m3                  // 06123000
	xor $mzero, $mzero, $mzero         // 06fff000
	xor $m7, $m10, $m13                // 067ad000
	shl $m1, $m2, $m3                  // 07123000
	shl $mzero, $mzero, $mzero         // 07fff000
	shl $m7, $m10, $m13                // 077ad000
	shr $m1, $m2, $m3                  // 08123000
	shr $mzero, $mzero, $mzero         // 08fff000
	shr $m7, $m10, $m13                // 087ad000
	sar $m1, $m2, $m3                  // 09123000
	sar $mzero, $mzero, $mzero         // 09fff000
	sar $m7, $m10, $m13                // 097ad000
	cmpeq $m1, $m2, $m3                // 0a123000
	cmpeq $mzero, $mzero, $mzero       // 0afff000
	cmpeq $m7, $m10, $m13              // 0a7ad000
	cmplt $m1, $m2, $m3                // 0b123000
	cmplt $mzero, $mzero, $mzero       // 0bfff000
	cmplt $m7, $m10, $m13              // 0b7ad000
	cmpult $m1, $m2, $m3               // 0c123000
	cmpult $mzero, $mzero, $mzero      // 0cfff000
	cmpult $m7, $m10, $m13             // 0c7ad000
	min $m1, $m2, $m3                  // 0d123000
	min $mzero, $mzero, $mzero         // 0dfff000
	min $m7, $m10, $m13                // 0d7ad000
	max $m1, $m2, $m3                  // 0e123000
	max $mzero, $mzero, $mzero         // 0efff000
	max $m7, $m10, $m13                // 0e7ad000
	addi $m1, $m2, -32768              // 10128000
	addi $mzero, $mzero, 32767         // 10ff7fff
	addi $m7, $m10, -1                 // 107affff
	andi $m1, $m2, 0                   // 11120000
	andi $mzero, $mzero, 65535         // 11ffffff
	andi $m7, $m10, 0x1234             // 117a1234
	ori $m1, $m2, 0                    // 12120000
	ori $mzero, $mzero, 65535          // 12ffffff
	ori $m7, $m10, 0x1234              // 127a1234
	xori $m1, $m2, 0                   // 13120000
	xori $mzero, $mzero, 65535         // 13ffffff
	xori $m7, $m10, 0x1234             // 137a1234
	shli $m1, $m2, 0                   // 14120000
	shli $mzero, $mzero, 65535         // 14ffffff
	shli $m7, $m10, 0x1234             // 147a1234
	shri $m1, $m2, 0                   // 15120000
	shri $mzero, $mzero, 65535         // 15ffffff
	shri $m7, $m10, 0x1234             // 157a1234
	sari $m1, $m2, 0                   // 16120000
	sari $mzero, $mzero, 65535         // 16ffffff
	sari $m7, $m10, 0x1234             // 167a1234
	muli $m1, $m2, -32768              // 17128000
	muli $mzero, $mzero, 32767         // 17ff7fff
	muli $m7, $m10, -1                 // 177affff
	cmpeqi $m1, $m2, -32768            // 18128000
	cmpeqi $mzero, $mzero, 32767       // 18ff7fff
	cmpeqi $m7, $m10, -1               // 187affff
	cmplti $m1, $m2, -32768            // 19128000
	cmplti $mzero, $mzero, 32767       // 19ff7fff
	cmplti $m7, $m10, -1               // 197affff
	li $m1, 0                          // 1a100000
	li $mzero, 0xfffff                 // 1affffff
	li $m7, 0x4c000                    // 1a74c000
	lih $m1, 0                         // 1b100000
	lih $mzero, 65535                  // 1bf0ffff
	lih $m7, 0x1234                    // 1b701234
	br .-2097148                       // 20080000
	br 0x24c140                        // 2007ffff
	br .+4                             // 20000000
	brz $m1, .-131068                  // 21018000
	brz $mzero, 0x6c14c                // 210f7fff
	brz $m7, .+4                       // 21070000
	brnz $m1, .-131068                 // 22018000
	brnz $mzero, 0x6c158               // 220f7fff
	brnz $m7, .+4                      // 22070000
	call $m1, .-2097148                // 23180000
	call $mzero, 0x24c164              // 23f7ffff
	call $m7, .+4                      // 23700000
	jr $m1                             // 24010000
	jr $mzero                          // 240f0000
	jr $m7                             // 24070000
	rpt $m1, 0                         // 25010000
	rpt $mzero, 65535                  // 250fffff
	rpt $m7, 0x1234                    // 25071234
	rpti 0, 0                          // 26000000
	rpti 4095, 255                     // 260fffff
	rpti 4, 3                          // 26000403
	ldm $m1, [$m2-32768]               // 30128000
	ldm $mzero, [$mzero+32767]         // 30ff7fff
	ldm $m7, [$m7]                     // 30770000
	stm $m1, [$m2-32768]               // 31128000
	stm $mzero, [$mzero+32767]         // 31ff7fff
	stm $m7, [$m7]                     // 31770000
	ldm $m1, [$m2-=32768]              // 32128000
	ldm $mzero, [$mzero+=32767]        // 32ff7fff
	ldm $m7, [$m7+=8]                  // 32770008
	stm $m1, [$m2-=32768]              // 33128000
	stm $mzero, [$mzero+=32767]        // 33ff7fff
	stm $m7, [$m7+=8]                  // 33770008
	ld32 $a1, [$m2-32768]              // 34128000
	ld32 $azero, [$mzero+32767]        // 34ff7fff
	ld32 $a7, [$m7]                    // 34770000
	st32 $a1, [$m2-32768]              // 35128000
	st32 $azero, [$mzero+32767]        // 35ff7fff
	st32 $a7, [$m7]                    // 35770000
	ld64 $a0:1, [$m2-32768]            // 36028000
	ld64 $a14:15, [$mzero+32767]       // 36ef7fff
	ld64 $a6:7, [$m7]                  // 36670000
	st64 $a0:1, [$m2-32768]            // 37028000
	st64 $a14:15, [$mzero+32767]       // 37ef7fff
	st64 $a6:7, [$m7]                  // 37670000
	ld128 $a0:3, [$m2-32768]           // 38028000
	ld128 $a12:15, [$mzero+32767]      // 38cf7fff
	ld128 $a4:7, [$m7]                 // 38470000
	st128 $a0:3, [$m2-32768]           // 39028000
	st128 $a12:15, [$mzero+32767]      // 39cf7fff
	st128 $a4:7, [$m7]                 // 39470000
	ld32 $a1, [$m2-=32768]             // 3a128000
	ld32 $azero, [$mzero+=32767]       // 3aff7fff
	ld32 $a7, [$m7+=8]                 // 3a770008
	st32 $a1, [$m2-=32768]             // 3b128000
	st32 $azero, [$mzero+=32767]       // 3bff7fff
	st32 $a7, [$m7+=8]                 // 3b770008
	ld64 $a0:1, [$m2-=32768]           // 3c028000
	ld64 $a14:15, [$mzero+=32767]      // 3cef7fff
	ld64 $a6:7, [$m7+=8]               // 3c670008
	st64 $a0:1, [$m2-=32768]           // 3d028000
	st64 $a14:15, [$mzero+=32767]      // 3def7fff
	st64 $a6:7, [$m7+=8]               // 3d670008
	ld128 $a0:3, [$m2-=32768]          // 3e028000
	ld128 $a12:15, [$mzero+=32767]     // 3ecf7fff
	ld128 $a4:7, [$m7+=8]              // 3e470008
	st128 $a0:3, [$m2-=32768]          // 3f028000
	st128 $a12:15, [$mzero+=32767]     // 3fcf7fff
	st128 $a4:7, [$m7+=8]              // 3f470008
	mta $a1, $m2                       // 40120000
	mta $azero, $mzero                 // 40ff0000
	mta $a7, $m10                      // 407a0000
	mfa $m1, $a2                       // 41120000
	mfa $mzero, $azero                 // 41ff0000
	mfa $m7, $a10                      // 417a0000
	amov $a1, $a2                      // 42120000
	amov $azero, $azero                // 42ff0000
	amov $a7, $a10                     // 427a0000
	ali $a1, 0                         // 43100000
	ali $azero, 0xfffff                // 43ffffff
	ali $a7, 0x4c000                   // 4374c000
	alih $a1, 0                        // 44100000
	alih $azero, 65535                 // 44f0ffff
	alih $a7, 0x1234                   // 44701234
	f32add $a1, $a2, $a3               // 48123000
	f32add $azero, $azero, $azero      // 48fff000
	f32add $a7, $a10, $a13             // 487ad000
	f32sub $a1, $a2, $a3               // 49123000
	f32sub $azero, $azero, $azero      // 49fff000
	f32sub $a7, $a10, $a13             // 497ad000
	f32mul $a1, $a2, $a3               // 4a123000
	f32mul $azero, $azero, $azero      // 4afff000
	f32mul $a7, $a10, $a13             // 4a7ad000
	f32fma $a1, $a2, $a3               // 4b123000
	f32fma $azero, $azero, $azero      // 4bfff000
	f32fma $a7, $a10, $a13             // 4b7ad000
	f32max $a1, $a2, $a3               // 4c123000
	f32max $azero, $azero, $azero      // 4cfff000
	f32max $a7, $a10, $a13             // 4c7ad000
	f32min $a1, $a2, $a3               // 4d123000
	f32min $azero, $azero, $azero      // 4dfff000
	f32min $a7, $a10, $a13             // 4d7ad000
	f32cmplt $a1, $a2, $a3             // 4e123000
	f32cmplt $azero, $azero, $azero    // 4efff000
	f32cmplt $a7, $a10, $a13           // 4e7ad000
	f32sel $a1, $a2, $a3, $a4          // 4f123400
	f32sel $azero, $azero, $azero, $azero // 4fffff00
	f32sel $a7, $a10, $a13, $a1        // 4f7ad100
	f32v2add $a0:1, $a0:1, $a0:1       // 50000000
	f32v2add $a14:15, $a14:15, $a14:15 // 50eee000
	f32v2add $a6:7, $a8:9, $a10:11     // 5068a000
	f32v2sub $a0:1, $a0:1, $a0:1       // 51000000
	f32v2sub $a14:15, $a14:15, $a14:15 // 51eee000
	f32v2sub $a6:7, $a8:9, $a10:11     // 5168a000
	f32v2mul $a0:1, $a0:1, $a0:1       // 52000000
	f32v2mul $a14:15, $a14:15, $a14:15 // 52eee000
	f32v2mul $a6:7, $a8:9, $a10:11     // 5268a000
	f32v2fma $a0:1, $a0:1, $a0:1       // 53000000
	f32v2fma $a14:15, $a14:15, $a14:15 // 53eee000
	f32v2fma $a6:7, $a8:9, $a10:11     // 5368a000
	f32v2max $a0:1, $a0:1, $a0:1       // 54000000
	f32v2max $a14:15, $a14:15, $a14:15 // 54eee000
	f32v2max $a6:7, $a8:9, $a10:11     // 5468a000
	f32v2min $a0:1, $a0:1, $a0:1       // 55000000
	f32v2min $a14:15, $a14:15, $a14:15 // 55eee000
	f32v2min $a6:7, $a8:9, $a10:11     // 5568a000
	f32v2cmplt $a0:1, $a0:1, $a0:1     // 56000000
	f32v2cmplt $a14:15, $a14:15, $a14:15 // 56eee000
	f32v2cmplt $a6:7, $a8:9, $a10:11   // 5668a000
	f32v2sel $a0:1, $a0:1, $a0:1, $a0:1 // 57000000
	f32v2sel $a14:15, $a14:15, $a14:15, $a14:15 // 57eeee00
	f32v2sel $a6:7, $a8:9, $a10:11, $a12:13 // 5768ac00
	f32v2cmpeq $a0:1, $a0:1, $a0:1     // 58000000
	f32v2cmpeq $a14:15, $a14:15, $a14:15 // 58eee000
	f32v2cmpeq $a6:7, $a8:9, $a10:11   // 5868a000
	f16v4add $a0:1, $a0:1, $a0:1       // 60000000
	f16v4add $a14:15, $a14:15, $a14:15 // 60eee000
	f16v4add $a6:7, $a8:9, $a10:11     // 6068a000
	f16v4sub $a0:1, $a0:1, $a0:1       // 61000000
	f16v4sub $a14:15, $a14:15, $a14:15 // 61eee000
	f16v4sub $a6:7, $a8:9, $a10:11     // 6168a000
	f16v4mul $a0:1, $a0:1, $a0:1       // 62000000
	f16v4mul $a14:15, $a14:15, $a14:15 // 62eee000
	f16v4mul $a6:7, $a8:9, $a10:11     // 6268a000
	f16v4fma $a0:1, $a0:1, $a0:1       // 63000000
	f16v4fma $a14:15, $a14:15, $a14:15 // 63eee000
	f16v4fma $a6:7, $a8:9, $a10:11     // 6368a000
	f16v4max $a0:1, $a0:1, $a0:1       // 64000000
	f16v4max $a14:15, $a14:15, $a14:15 // 64eee000
	f16v4max $a6:7, $a8:9, $a10:11     // 6468a000
	f16v4min $a0:1, $a0:1, $a0:1       // 65000000
	f16v4min $a14:15, $a14:15, $a14:15 // 65eee000
	f16v4min $a6:7, $a8:9, $a10:11     // 6568a000
	f16v4cmplt $a0:1, $a0:1, $a0:1     // 66000000
	f16v4cmplt $a14:15, $a14:15, $a14:15 // 66eee000
	f16v4cmplt $a6:7, $a8:9, $a10:11   // 6668a000
	f16v4sel $a0:1, $a0:1, $a0:1, $a0:1 // 67000000
	f16v4sel $a14:15, $a14:15, $a14:15, $a14:15 // 67eeee00
	f16v4sel $a6:7, $a8:9, $a10:11, $a12:13 // 6768ac00
	f16v4cmpeq $a0:1, $a0:1, $a0:1     // 68000000
	f16v4cmpeq $a14:15, $a14:15, $a14:15 // 68eee000
	f16v4cmpeq $a6:7, $a8:9, $a10:11   // 6868a000
	f32exp $a1, $a2                    // 70120000
	f32exp $azero, $azero              // 70ff0000
	f32exp $a7, $a10                   // 707a0000
	f32log $a1, $a2                    // 71120000
	f32log $azero, $azero              // 71ff0000
	f32log $a7, $a10                   // 717a0000
	f32rcp $a1, $a2                    // 72120000
	f32rcp $azero, $azero              // 72ff0000
	f32rcp $a7, $a10                   // 727a0000
	f32rsqrt $a1, $a2                  // 73120000
	f32rsqrt $azero, $azero            // 73ff0000
	f32rsqrt $a7, $a10                 // 737a0000
	f32sqrt $a1, $a2                   // 74120000
	f32sqrt $azero, $azero             // 74ff0000
	f32sqrt $a7, $a10                  // 747a0000
	f32tanh $a1, $a2                   // 75120000
	f32tanh $azero, $azero             // 75ff0000
	f32tanh $a7, $a10                  // 757a0000
	f32erf $a1, $a2                    // 76120000
	f32erf $azero, $azero              // 76ff0000
	f32erf $a7, $a10                   // 767a0000
	f32abs $a1, $a2                    // 77120000
	f32abs $azero, $azero              // 77ff0000
	f32abs $a7, $a10                   // 777a0000
	f32neg $a1, $a2                    // 78120000
	f32neg $azero, $azero              // 78ff0000
	f32neg $a7, $a10                   // 787a0000
	f32v2exp $a0:1, $a0:1              // 79000000
	f32v2exp $a14:15, $a14:15          // 79ee0000
	f32v2exp $a6:7, $a8:9              // 79680000
	f32v2rcp $a0:1, $a0:1              // 7a000000
	f32v2rcp $a14:15, $a14:15          // 7aee0000
	f32v2rcp $a6:7, $a8:9              // 7a680000
	f32v2abs $a0:1, $a0:1              // 7b000000
	f32v2abs $a14:15, $a14:15          // 7bee0000
	f32v2abs $a6:7, $a8:9              // 7b680000
	f32v2neg $a0:1, $a0:1              // 7c000000
	f32v2neg $a14:15, $a14:15          // 7cee0000
	f32v2neg $a6:7, $a8:9              // 7c680000
	f32pow $a1, $a2, $a3               // 7d123000
	f32pow $azero, $azero, $azero      // 7dfff000
	f32pow $a7, $a10, $a13             // 7d7ad000
	f32sin $a1, $a2                    // 7e120000
	f32sin $azero, $azero              // 7eff0000
	f32sin $a7, $a10                   // 7e7a0000
	f32cos $a1, $a2                    // 7f120000
	f32cos $azero, $azero              // 7fff0000
	f32cos $a7, $a10                   // 7f7a0000
	f32v2tof16 $a1, $a0:1              // 80100000
	f32v2tof16 $azero, $a14:15         // 80fe0000
	f32v2tof16 $a7, $a8:9              // 80780000
	f16v2tof32 $a0:1, $a2              // 81020000
	f16v2tof32 $a14:15, $azero         // 81ef0000
	f16v2tof32 $a6:7, $a10             // 816a0000
	f16v4tof8 $a1, $a0:1               // 82100000
	f16v4tof8 $azero, $a14:15          // 82fe0000
	f16v4tof8 $a7, $a8:9               // 82780000
	f8tof16v4 $a0:1, $a2               // 83020000
	f8tof16v4 $a14:15, $azero          // 83ef0000
	f8tof16v4 $a6:7, $a10              // 836a0000
	f32v2tof8 $a1, $a0:1               // 84100000
	f32v2tof8 $azero, $a14:15          // 84fe0000
	f32v2tof8 $a7, $a8:9               // 84780000
	f8tof32v2 $a0:1, $a2               // 85020000
	f8tof32v2 $a14:15, $azero          // 85ef0000
	f8tof32v2 $a6:7, $a10              // 856a0000
	i32tof32 $a1, $a2                  // 86120000
	i32tof32 $azero, $azero            // 86ff0000
	i32tof32 $a7, $a10                 // 867a0000
	f32toi32 $a1, $a2                  // 87120000
	f32toi32 $azero, $azero            // 87ff0000
	f32toi32 $a7, $a10                 // 877a0000
	f32v2sum $a1, $a0:1                // 88100000
	f32v2sum $azero, $a14:15           // 88fe0000
	f32v2sum $a7, $a8:9                // 88780000
	f16v4sum $a1, $a0:1                // 89100000
	f16v4sum $azero, $a14:15           // 89fe0000
	f16v4sum $a7, $a8:9                // 89780000
	ampclr                             // 90000000
	amph $m1, $m2                      // 91012000
	amph $mzero, $mzero                // 910ff000
	amph $m7, $m10                     // 9107a000
	ampq $m1, $m2                      // 92012000
	ampq $mzero, $mzero                // 920ff000
	ampq $m7, $m10                     // 9207a000
	ampst $m1, 0                       // 93010000
	ampst $mzero, 255                  // 930f00ff
	ampst $m7, 7                       // 93070007
	ampld $m1, 0                       // 94010000
	ampld $mzero, 255                  // 940f00ff
	ampld $m7, 7                       // 94070007
	ampf $m1, $m2                      // 95012000
	ampf $mzero, $mzero                // 950ff000
	ampf $m7, $m10                     // 9507a000
	run $m1, $m2, 0                    // a0012000
	run $mzero, $mzero, 255            // a00ff0ff
	run $m7, $m10, 7                   // a007a007
	exit                               // a1000000
	join                               // a2000000
	sync                               // a3000000
	hsync $m1                          // a4100000
	hsync $mzero                       // a4f00000
	hsync $m7                          // a4700000
	halt                               // a5000000
	get $m1, tileid                    // a6100000
	get $mzero, 5                      // a6f00005
	get $m7, fp8                       // a6700003
	get $m1, tileid                    // a6100000
	get $m1, context                   // a6100001
	get $m1, cycles                    // a6100002
	get $m1, fp8                       // a6100003
	get $m1, phase                     // a6100004
	get $m1, tiles                     // a6100005
	put tileid, $m2                    // a7020000
	put 5, $mzero                      // a70f0005
	put fp8, $m10                      // a70a0003
	put tileid, $m1                    // a7010000
	put context, $m1                   // a7010001
	put cycles, $m1                    // a7010002
	put fp8, $m1                       // a7010003
	put phase, $m1                     // a7010004
	put tiles, $m1                     // a7010005
	delay 0                            // a8000000
	delay 0xfffff                      // a80fffff
	delay 0x4c000                      // a804c000
	send $m1, $m2, $m3                 // b0123000
	send $mzero, $mzero, $mzero        // b0fff000
	send $m7, $m10, $m13               // b07ad000
	send2 $m1, $m2, $m3                // b1123000
	send2 $mzero, $mzero, $mzero       // b1fff000
	send2 $m7, $m10, $m13              // b17ad000
	recv $m1, $m2, $m3                 // b2123000
	recv $mzero, $mzero, $mzero        // b2fff000
	recv $m7, $m10, $m13               // b27ad000
	hin $m1, $m2, $m3                  // b8123000
	hin $mzero, $mzero, $mzero         // b8fff000
	hin $m7, $m10, $m13                // b87ad000
	hout $m1, $m2, $m3                 // b9123000
	hout $mzero, $mzero, $mzero        // b9fff000
	hout $m7, $m10, $m13               // b97ad000
// Other spellings of the same operands.
	ldm $m1, [$m2+=-8]                 // 3212fff8
	ldm $m1, [$m2 + 2*4]               // 30120008
	ldm $m1, [$m2 - (1 << 4)]          // 3012fff0
	addi $m1, $m2, -0x8000             // 10128000
	LI $m0, 0x12345                    // 1a012345
target:
	li $m0, target                     // 1a04c608
	br target                          // 200ffffe
	brz $m3, target                    // 2103fffd
	call $m4, after                    // 23400001
	nop                                // 00000000
after:
	li $m5, after - target             // 1a500014
	ld32 $a2, [$m3+=K]                 // 3a23000c
	get $m1, K - 10                    // a6100002
	rpti K * 2, K + 1                  // 2600180d
	sort16lo $m1, $m2, $m3             // 1c123000
	sort16lo $mzero, $mzero, $mzero    // 1cfff000
	sort16hi $m7, $m10, $m13           // 1d7ad000
	f32v2tof8hi $a1, $a0:1             // 8a100000
	f32v2tof8hi $azero, $a14:15        // 8afe0000
	f32v2tof8hi $a7, $a8:9             // 8a780000
