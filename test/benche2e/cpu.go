package benche2e

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux platform Go supports.
const clockTicks = 100

// ProcCPU is the CPU time a process spent over a measurement.
type ProcCPU struct {
	Name string
	CPU  time.Duration // user + system
}

// cpuTime reads user+system time of pid from /proc.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// parseStat extracts utime+stime (fields 14 and 15) from a /proc/<pid>/stat
// line; the command name (field 2) may hold spaces and parentheses, so
// fields are counted from the last ')'.
func parseStat(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat %q", stat)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// cpuSnapshot reads the CPU time of each named pid; unreadable ones
// (exited) are left out.
func cpuSnapshot(pids map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, pid := range pids {
		if d, err := cpuTime(pid); err == nil {
			out[name] = d
		}
	}
	return out
}

// cpuDelta is after minus before for every process in both, in the order
// of names.
func cpuDelta(names []string, before, after map[string]time.Duration) []ProcCPU {
	var out []ProcCPU
	for _, n := range names {
		b, ok1 := before[n]
		a, ok2 := after[n]
		if ok1 && ok2 {
			out = append(out, ProcCPU{Name: n, CPU: a - b})
		}
	}
	return out
}

// FormatCPU is e.g. "kube-apiserver 4.10s (2.7ms/pod), etcd 0.80s (...), total 7.00s",
// per pod over pods.
func FormatCPU(cpu []ProcCPU, pods int) string {
	var b strings.Builder
	var total time.Duration
	for _, c := range cpu {
		total += c.CPU
		fmt.Fprintf(&b, "%s %.2fs", c.Name, c.CPU.Seconds())
		if pods > 0 {
			fmt.Fprintf(&b, " (%.2fms/pod)", c.CPU.Seconds()*1000/float64(pods))
		}
		b.WriteString(", ")
	}
	fmt.Fprintf(&b, "total %.2fs", total.Seconds())
	if pods > 0 {
		fmt.Fprintf(&b, " (%.2fms/pod)", total.Seconds()*1000/float64(pods))
	}
	return b.String()
}

func numCPU() int { return runtime.NumCPU() }
