// Host program and device configuration.
.page 0, 16
.page 0, 32                     // ERROR: page 0 already declared at line 2
.page 256, 8                    // ERROR: .page: page id 256 out of range 0..255
.page 1, 0                      // ERROR: .page: page size 0 out of range 1..16777216
.input x, float, [2, 3], 0, 0   // ERROR: .input "x": bytes [0, 24) do not fit in page 0 (16 bytes)
.input y, float, [1], 5, 0      // ERROR: .input: page 5 is not declared
.input z, floaty, [1], 0, 0     // ERROR: .input: unknown data type "floaty"
.output w, float, [-1], 0, 0    // ERROR: .output: dimension -1 is negative
.phase later, "x"               // ERROR: unknown phase kind later (want compute, exchange or host)
.config 0x100, 0x100000000      // ERROR: .config: value 4294967296 out of range
.config entry, 0, 9999          // ERROR: .config: tile 9999 out of range 0..1471
