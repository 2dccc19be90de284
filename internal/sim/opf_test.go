package sim

import "testing"

// OPF in the simulated fabric detours pre-credit packets instead of trimming them at
// congested ports, and every byte still arrives.
func TestOPFDetoursInsteadOfTrimming(t *testing.T) {
	off, err := opfRun("hadoop", hadoopCDF, false, 3e6, 500_000, 8, 8, 4)
	if err != nil {
		t.Fatal(err)
	}
	on, err := opfRun("hadoop", hadoopCDF, true, 3e6, 500_000, 8, 8, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("off %+v", off)
	t.Logf("on  %+v", on)
	if off.Failed != 0 || on.Failed != 0 || on.ShortFlows != off.ShortFlows {
		t.Fatalf("flows failed: off %d, on %d", off.Failed, on.Failed)
	}
	if off.Detoured != 0 || on.Detoured == 0 || on.Trimmed >= off.Trimmed {
		t.Fatalf("detoured %d/%d, trimmed %d without OPF and %d with", off.Detoured, on.Detoured, off.Trimmed, on.Trimmed)
	}
}
