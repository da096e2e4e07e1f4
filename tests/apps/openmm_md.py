"""A short molecular dynamics run on OpenMM's OpenCL platform (Debian's
python3-simtk and libopenmm-plugins), printed so that runs can be compared.

OpenMM ships its own test system (alanine dipeptide in water); this runs it
with particle-mesh Ewald for STEPS steps of a seeded Langevin integrator, then
prints the potential energy, an MD5 of the final positions and velocities, the
time the steps took (for bench/wormhole/openmm.sh), and the largest force difference from OpenMM's Reference platform (plain C++ on
the host) on the same positions. The script fails if the OpenCL forces are not
within tolerance of the Reference ones, so a run is checked on its own as well
as against another run.

    python3 tests/apps/openmm_md.py [STEPS]
"""
import hashlib
import os
import sys
import time

import numpy as np
import openmm
from openmm import app, unit

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 200


def main():
    data = os.path.join(os.path.dirname(openmm.__file__), "app", "data")
    pdb = app.PDBFile(os.path.join(data, "test.pdb"))
    ff = app.ForceField("amber99sb.xml", "tip3p.xml")
    system = ff.createSystem(pdb.topology, nonbondedMethod=app.PME,
                             nonbondedCutoff=1 * unit.nanometer, constraints=app.HBonds)

    def context(platform):
        integ = openmm.LangevinMiddleIntegrator(300 * unit.kelvin, 1 / unit.picosecond,
                                                0.002 * unit.picoseconds)
        integ.setRandomNumberSeed(4242)
        ctx = openmm.Context(system, integ, openmm.Platform.getPlatformByName(platform))
        ctx.setPositions(pdb.positions)
        ctx.setVelocitiesToTemperature(300 * unit.kelvin, 4242)
        return integ, ctx

    integ, ctx = context("OpenCL")
    t0 = time.perf_counter()
    integ.step(STEPS)
    # step() returns with work in flight; downloading the positions waits for it.
    ctx.getState(getPositions=True)
    took = time.perf_counter() - t0
    st = ctx.getState(getEnergy=True, getPositions=True, getVelocities=True, getForces=True)
    pos = st.getPositions(asNumpy=True).value_in_unit(unit.nanometer)
    vel = st.getVelocities(asNumpy=True).value_in_unit(unit.nanometer / unit.picosecond)
    forces = st.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer)
    digest = hashlib.md5(np.ascontiguousarray(pos, dtype=np.float64).tobytes()
                         + np.ascontiguousarray(vel, dtype=np.float64).tobytes()).hexdigest()

    _, ref = context("Reference")
    ref.setPositions(pos)
    rf = ref.getState(getForces=True).getForces(asNumpy=True).value_in_unit(
        unit.kilojoule_per_mole / unit.nanometer)
    # Relative to the largest force, as OpenMM's own platform tests compare.
    rel = float(np.max(np.linalg.norm(forces - rf, axis=1)) / np.max(np.linalg.norm(rf, axis=1)))

    energy = st.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
    print(f"steps {STEPS} potential {energy:.3f} kJ/mol state md5 {digest}")
    print(f"stepping took {took:.3f} s ({STEPS / took:.1f} steps/s)")
    print(f"largest force difference from Reference: {rel:.2e} of the largest force")
    if not np.isfinite(energy) or rel > 1e-3:
        print("FAIL: OpenCL forces are not within tolerance of the Reference platform")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
