// Command ipu-plan maps an ONNX model onto the tiles and writes the plan:
//
//	ipu-plan MODEL.onnx -o OUT.plan [--arch ipu21] [--tiles N] [--state STATE.json] [--max-attempts N] [--seed N]
//	         [--downcast-fp64] [--dim NAME=N]... [--input-shapes DIR] [--progress auto|always|never]
//	         [--shard I/N]
//	ipu-plan --merge MODEL.onnx STATE.json... -o OUT.plan [--downcast-fp64] [--dim NAME=N]... [--input-shapes DIR]
//
// --shard I/N searches shard I of a search split N ways: the same
// analytic start, then --max-attempts moves drawn from the seed's
// generator jumped I x 2^64 draws ahead, so that the shards' walks draw
// disjoint streams (shard 0's is the unsharded search's); give each
// shard its own --state (without one the shard's plan is written with a
// warning: --merge has nothing of it to join). --merge reads the shards' states (same model,
// arch, tiles, seed and shard count, each shard once, each validated:
// the state records the incumbent's linked cycles) and writes the plan
// of the best, the fewest validated cycles and the lowest shard on a
// tie: the plan that shard wrote, byte for byte. A state that does not
// fit is refused in one line naming its file, and nothing is written.
//
// --downcast-fp64 computes DOUBLE tensors in FP32 (a WARN names each; the
// plan's graph records them and ipu-check reads their double test data
// rounded to float). A symbolic input dimension (an exporter's dynamic
// axis) is bound by --dim NAME=N or by the shapes of DIR/input_N.pb with
// --input-shapes; left unbound it is an error naming the dimension, and
// so is a --dim name no input has. Declared output and value_info shapes
// that the bound dimensions contradict (an exporter declares the shapes
// it traced at, fixed, unless told they vary) get a WARN each, and the
// plan takes the bound shapes, as onnxruntime runs such a model. With
// stderr on a terminal (--progress auto, the default) a progress bar shows
// the products the search's start has decided, then its attempts and the
// incumbent's cycles; logs never get one.
//
// It reads the model (and the data of tensors it keeps in other files,
// ONNX external data: locations relative to the model's folder, which
// may not leave it; the plan's fingerprint covers that data too), builds
// its graph (an operator outside the supported
// set stops it with `unsupported operator X (node "name")`), and runs the
// planner's seeded search (libs/planner): an analytic start, then
// --max-attempts local moves. With --state, the search continues from the
// state file when it exists and the new state is saved there afterwards,
// so two runs of N attempts give the same plan as one run of 2N. "loaded
// mid-plan search state" is logged only when the file existed and was
// read (its attempts are the state's); a missing file starts a fresh
// search silently. A state made for another model, architecture, tile
// count or seed is refused.
//
// A model that does not fit the tiles' memory fails with the planner's
// memory report (the worst tiles, their bytes by category) on one line.
//
// The log follows the seed: inside ipu_codegen.package.build{tile_count=N
// operations=M} (N the tiles planned over, M the graph's nodes), a
// compile_runtime phase (the tile runtime compiled for the architecture,
// which the validation link takes) and the plan_package phase, whose lines give the
// exchange geometry of the incumbent, the FP8 padding clears removed, the
// transfers, the incumbent's cycles and the state saved.
//
// The incumbent is validated by running ipu-link's lowering in process
// (libs/link; its phases nest in plan_package, as in the seed) and
// building its tile images: the plan's final_cycles are the linked
// program's (cost.estimated=false), the figure ipu-link reports for the
// same plan. A plan the linker refuses is not written: ipu-plan fails
// with the linker's one-line error, so it never leaves a plan that
// ipu-link would refuse. The validated exchange schedules go into the
// plan (exchange_schedules), and ipu-link relocates and validates them
// instead of scheduling again. The search's memory check counts a tile's
// bytes, and on each tile the bytes the AMP needs in interleaved memory
// (a search that ends on no point within that region fails with "out of
// interleaved memory on N tiles ..."), not the free ranges the linker
// places buffers in: when the
// inference objective's incumbent does not link, a WARN says why and
// the search runs again under the device objective; when a plan still
// does not place, a WARN says so and the search runs again with a
// sixteenth, then an eighth, then a quarter of every tile's usable
// memory kept free (the state records it as memory_reserve, which a
// resumed search keeps). A variable that then still finds no free range
// although the bytes are free, in pieces, searches again as the first
// search did with no variable that large on any tile (a WARN says so;
// the state records the limit as max_variable_bytes, which a resumed
// search keeps): the linker places each buffer in one range while the
// others live around it, and large variables are what it cannot fit
// between them. Row layouts the start lays out whole because a
// tile's code would not fit them halved are recorded too (whole_rows),
// so that a resumed search prices the same plans. The linker's exchange
// scheduler (libs/sched) first schedules each exchange superstep without
// the supervisor's issue-slot constraint, validates every transfer
// against it and reschedules only
// the failing transfers and those planned after them on their tiles (or,
// when those are nearly all of the superstep, takes its exact schedule);
// the validation link's figures give "retrying exchange schedule with
// incremental instruction-alignment validation transfers=N" (N failing
// transfers; logged only when some failed) and "finished incremental
// instruction-alignment validation" (logged when a superstep was
// scheduled, not when every schedule was reused from the state).
//
// The plan and the state are written atomically, and the same inputs give
// byte-identical files (the model path is recorded as given, or as its
// base name when absolute).
//
// Exit status: 0 on success, 1 on failure, 2 on a usage error.
package main
