# The profile of one ipu-check run: what the simulated device measured while
# running the package's "run" call. Written by formats/profile (Go, by hand
# against the capnp library's low-level API); read it with
#
#   capnp decode formats/profile/profile.capnp Profile < model.capnp
#
# The Go code in profile.go places every field at the offset the capnp
# compiler assigns. Add fields only at the end (next ordinal) and change the
# Go offsets to match what `capnp compile` then assigns.
@0xbdb14221295ad78e;

struct Profile {
  version      @0 :UInt32;        # 1; a reader rejects any other value
  arch         @1 :Text;          # architecture preset name, "ipu21"
  fingerprint  @2 :Text;          # fingerprint (hex SHA-256) of the package that ran
  tiles        @3 :UInt32;        # tiles on the chip; every tileCycles list has this length
  clockHz      @4 :Float64;       # tile clock, to turn cycles into time
  samplePeriod @5 :UInt64;        # cycles between PC samples (0: no samples)
  totalCycles  @6 :UInt64;        # cycles of the profiled inferences, syncs included
  inferences   @7 :UInt32;        # inferences the profile covers
  phases       @8 :List(Phase);   # supersteps in execution order
  samples      @9 :List(Sample);  # sampled supervisor PCs, in recording order
  branches     @10 :List(Branch); # the Ifs the tiles branched on, in program order
}

struct Branch {
  ifName  @0 :Text;    # the If node
  thenRan @1 :Bool;    # true: the then side ran; false: the else side
  cycles  @2 :UInt64;  # cycles of the side that ran (its phases, syncs included)
}

enum PhaseKind {
  unknown  @0;   # the package's phase list does not describe this superstep
  compute  @1;
  exchange @2;
  host     @3;   # host exchange
}

struct Phase {
  index         @0 :UInt32;         # superstep index since the device was loaded
  kind          @1 :PhaseKind;
  name          @2 :Text;           # the package's name for the phase, or empty
  cycles        @3 :UInt64;         # longest tile, without the sync
  syncCycles    @4 :UInt64;         # barrier cost
  tileCycles    @5 :List(UInt64);   # per tile; 0 for an inactive tile
  exchangeBytes @6 :List(UInt64);   # per tile: bytes sent
  hostBytes     @7 :UInt64;         # bytes moved over the host link
  instructions  @8 :UInt64;         # instructions issued by every context of every tile
  tileCounters  @9 :List(UInt64);   # per tile: the cycle counter its supervisor stored in its profile
                                    # buffer at the end of a compute superstep (read back from tile
                                    # memory after the run); empty for other supersteps and in older profiles
}

struct Sample {
  tile  @0 :UInt32;
  phase @1 :UInt32;   # superstep index, as Phase.index
  cycle @2 :UInt64;   # cycle within the superstep, as the simulator counts it
  pc    @3 :UInt32;   # supervisor program counter
}
