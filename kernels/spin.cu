// Calibration of the per-launch timestamps (tests/gpu_timing.rs): one block that spins for a
// given number of SM clock cycles, so its duration is known from the SM clock rate alone.
extern "C" __global__ void spin(long long cycles, STAMP_PARAMS) {
    STAMP_GUARD;
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}
