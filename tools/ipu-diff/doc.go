// Command ipu-diff shows how two artifacts of one kind differ, in the
// artifact's own terms rather than bytes or dump lines:
//
//	ipu-diff A B
//
// The kind comes from the files' magic numbers: two objects (.ipuobj),
// two packages (.ipuexe) or two plans (JSON: tensors that moved or changed
// layout, steps whose split, cast order or tiles changed, the cost). Each
// difference is one line on stdout, in a fixed order: header fields ("header: compiler "0.1.0" -> "0.2.0""),
// tiles, with tiles that differ in the same way sharing their lines
// ("tiles 0-63: segment "text": contents differ from 0x0004c008 (4 of
// 1060 bytes)"; segments, symbols and exchange transfers added, removed,
// moved or resized), then the host program ("host: phase 3 added: ...")
// and the device configuration ("config: tile all reg 0x0100: ...").
// A package's tiles are compared by the image each loads, whatever the
// images' numbering.
//
// Exit status, as diff(1): 0 when the artifacts are equivalent (nothing
// is printed), 1 when they differ, 2 on trouble: a wrong command line, a
// file that cannot be read or decoded, or files of different kinds.
package main
