// Command ipu-pack turns a linked object into an application package:
//
//	ipu-pack IN.ipuobj -o OUT.ipuexe
//
// It reads and checks the object, looks up the architecture the object
// names, and builds one image for every tile of that architecture: each
// programmed tile's segments, symbols and exchange transfers, checked
// against the tile memory map, and for every other tile the shared idle
// image (one halt). Identical images are stored once. The device
// configuration is the object's, followed by each programmed tile's entry
// register. The package records the fingerprint (SHA-256) of the object
// file, and is written atomically: on any error OUT.ipuexe is left as it
// was.
//
// The same object always gives a byte-identical package.
//
// Exit status: 0 on success, 1 on failure, 2 on a usage error.
package main
