// Command ipu-load loads an application package onto an IPU device:
//
//	ipu-load --device DEV [--lock FILE] [--lock-timeout DUR] [--progress auto|always|never] IN.ipuexe
//
// With stderr on a terminal (--progress auto) a progress bar shows the
// tile image writes.
//
// It reads and checks the package, takes exclusive ownership of the
// hardware (an flock on --lock, by default DEV.lock, waiting up to
// --lock-timeout, default 10s, while another process holds it), powers
// the device on, replays the package's device configuration, writes every
// tile's image and runs the startup program to the first host sync. The device is the
// simulated one of package device: a file that ipu-check later opens to
// run the application. A device file that does not exist is created, for
// the package's architecture.
//
// A load that does not finish (an error, or the process killed) leaves the
// device marked not loaded; ipu-check refuses it until a load succeeds.
//
// Exit status: 0 on success, 1 on failure, 2 on a usage error.
package main
