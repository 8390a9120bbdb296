// Tiles, entries and transfers.
.arch ipu21-tiny
.arch ipu2                      // ERROR: .arch ipu2 conflicts with .arch ipu21-tiny at line 2
.tile 4                         // ERROR: tile 4 outside the architecture (ipu21-tiny has tiles 0..3)
.tile 3-1                       // ERROR: tile range 3-1 is empty
.tile 0-1
.section t, code
	br other                    // ERROR: undefined symbol other on tiles 0-1 (it is a label of other tiles)
.entry 0x4c002                  // ERROR: entry 0x4c002 is not 4-aligned
.entry 0x80000                  // ERROR: entry 0x80000 is not inside a code section on tiles 0-1
.tile 2
.section t, code
other:
	nop
.entry other
.entry other                    // ERROR: entry already set at line 15
.xfer 0, 0, 3, 2, 1             // ERROR: .xfer destination tiles 3..4 outside the architecture
.xfer 0, -1, 3, 1, 1            // ERROR: .xfer cycle -1 out of range
