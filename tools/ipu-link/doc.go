// Command ipu-link lowers a plan to a linked object: tile code for every
// kernel, exchange phases scheduled to the cycle, tile memory placement
// and the host program.
//
//	ipu-link IN.plan -o OUT.ipuobj [--model MODEL.onnx] [--state STATE.json]
//
// The plan's exchange_schedules (ipu-plan's validation link made them)
// are reused by default, and --state's instead when given: each is
// relocated to its superstep and validated by replaying its code, and
// used only then (the object is the one scheduling gives); a superstep
// whose pattern none matches is scheduled; a state for another model,
// architecture or tile count is refused.
//
// It needs nothing but the plan: the plan embeds the model's graph and
// constants. It logs the seed's link phases (compile_runtime,
// plan_kernels, compile_kernels, link_runtime, size_tile_code,
// place_storage, lower_exchanges, optimize_exchange_placement,
// prepare_tile_code, emit_tile_code) with elapsed_ms and success,
// `placed the buffers of no region another way policy= reason=` when
// place_storage placed them in non-interleaved memory first because a
// buffer found no room the first way, the placement lines
// (optimize_exchange_placement's: the repeat loops'
// patch-table runs it stored once for several loops, moved_runs, and
// the bytes that saved), and `costed final placed program final_cycles=...
// final_exchange=...`: the cycles of the device program from its first
// compute superstep to its last, the same figure ipu-plan reports for the
// plan. Operators the linker does not generate code for stop it with
// `node "n": operator X is not lowered: ...` and exit status 1. With
// --model, a plan made from another model is refused by its fingerprint.
package main
