package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nuid"

	"github.com/planbus/planbus"
	"github.com/planbus/planbus/internal/bus"
)

// SoakConfig says how a soak runs.
type SoakConfig struct {
	// Duration of the submissions.
	Duration time.Duration
	// Rate of submissions, plans a second.
	Rate int
	// Sample is the time between two samples. Default 10 s.
	Sample time.Duration
	// Drain is how long the soak waits, after the last submission, for
	// the plans still running. Default 1 minute.
	Drain time.Duration
	// Workload is the one plan submitted over and over (its Instances are
	// ignored). Default the 5-tool diamond of many-plans.
	Workload *Workload
	// RSS reads the resident set size, in bytes, of each process of the
	// system, named by Names in the same order; required.
	RSS   func() ([]int64, error)
	Names []string
	// LiveHeap, if set, reads the live Go heap of the process that runs
	// the server (what its last collection kept): beside RSS, it tells
	// what a retained plan holds from what the collector's room and the
	// allocator's free pages add.
	LiveHeap func() int64
	// AtWarmUp, if set, is called once, when the first sample at or after
	// the warm-up (SoakResult.Warmup) has been taken: a heap profile then
	// and one at the end show what the plans retained after it hold.
	AtWarmUp func()
	// Progress, if set, gets each sample as it is taken.
	Progress io.Writer
	// WarmUp, if longer than the first tenth of the soak, is what the
	// verdict leaves out instead: a system keeps everything for its
	// retention, so its memory can only level off after that.
	WarmUp time.Duration
	// PlanTimeout, if set, is each plan's timeout; it must fit the
	// system's retention (less a minute), or dispatchers refuse the plans.
	PlanTimeout time.Duration
	// Retention, if set, is how long the system keeps a finished plan;
	// the verdict's cost per retained plan says when plans expired
	// during the soak (then the slope is not a retained plan's cost).
	Retention time.Duration
}

// SoakSample is the system at one moment of a soak, and what it did since
// the sample before.
type SoakSample struct {
	At          time.Duration // since the soak started
	RSS         []int64       // bytes, a process each (SoakConfig.Names)
	LiveHeap    int64         // bytes, the server's process (SoakConfig.LiveHeap); 0 unread
	Submitted   int           // plans submitted so far
	Finished    int           // plans finished so far (succeeded or not)
	Failed      int           // plans that ended unsuccessful so far
	PlansPerSec float64       // plans finished a second since the sample before
	P50, P99    time.Duration // latency of the plans finished since the sample before
	// End marks the last sample, taken after the drain.
	End bool
}

// TotalRSS is the sum of the processes' RSS.
func (s SoakSample) TotalRSS() int64 {
	var sum int64
	for _, r := range s.RSS {
		sum += r
	}
	return sum
}

// SoakResult is a soak's samples and verdict.
type SoakResult struct {
	Config  SoakConfig
	Samples []SoakSample
	// Lost are plans still without a result at the end of the drain.
	Lost int
}

// plateauBand is how far RSS may move from its level after the warm-up
// and still count as a plateau.
const plateauBand = 0.10

// Warmup is the part of a soak its verdict leaves out: the first tenth,
// at most ten minutes, or SoakConfig.WarmUp if that is longer.
func (r *SoakResult) Warmup() time.Duration {
	return max(min(r.Config.Duration/10, 10*time.Minute), r.Config.WarmUp)
}

// Plateau tells whether the total RSS stayed within ±10% of its first
// sample at or after the warm-up, for every later sample; ok is false
// when no sample came after the warm-up. lo and hi are the lowest and
// highest total RSS from that sample on, ref the sample's own.
func (r *SoakResult) Plateau() (flat, ok bool, ref, lo, hi int64) {
	for i, s := range r.Samples {
		if s.At < r.Warmup() {
			continue
		}
		ref, lo, hi = s.TotalRSS(), s.TotalRSS(), s.TotalRSS()
		for _, t := range r.Samples[i+1:] {
			lo, hi = min(lo, t.TotalRSS()), max(hi, t.TotalRSS())
		}
		band := float64(ref) * plateauBand
		return float64(hi-ref) <= band && float64(ref-lo) <= band, len(r.Samples) > i+1, ref, lo, hi
	}
	return false, false, 0, 0, 0
}

// Verdict is the plateau's in a sentence.
func (r *SoakResult) Verdict() string {
	flat, ok, ref, lo, hi := r.Plateau()
	mb := func(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }
	switch {
	case !ok:
		return fmt.Sprintf("too short to tell: fewer than two samples after the warm-up (%s)", r.Warmup())
	case flat:
		return fmt.Sprintf("RSS plateaued: after the warm-up (%s) it stayed within ±10%% of %s (%s to %s)", r.Warmup(), mb(ref), mb(lo), mb(hi))
	default:
		return fmt.Sprintf("RSS did not plateau: after the warm-up (%s) it moved from %s to between %s and %s (%+.0f%%), beyond ±10%%",
			r.Warmup(), mb(ref), mb(lo), mb(hi), 100*float64(hi-ref)/float64(ref))
	}
}

// PerPlan is the bytes of RSS each plan finished after the warm-up
// added: the least-squares slope of the total RSS against the plans
// finished, over the samples at or after the warm-up (the end's
// included). While the retention outlasts the soak every finished plan
// is still kept, so this is what a retained plan costs. ok is false
// with fewer than two such samples or no plan finished between them.
func (r *SoakResult) PerPlan() (bytes float64, samples int, ok bool) {
	return r.slope(SoakSample.TotalRSS)
}

// PerPlanLive is PerPlan of the live heap (SoakConfig.LiveHeap); ok is
// false when it was not read.
func (r *SoakResult) PerPlanLive() (bytes float64, samples int, ok bool) {
	if r.Config.LiveHeap == nil {
		return 0, 0, false
	}
	return r.slope(func(s SoakSample) int64 { return s.LiveHeap })
}

// slope is the least-squares slope of y against the plans finished over
// the samples at or after the warm-up.
func (r *SoakResult) slope(y func(SoakSample) int64) (bytes float64, samples int, ok bool) {
	var n, sx, sy float64
	for _, s := range r.Samples {
		if s.At < r.Warmup() {
			continue
		}
		n++
		sx += float64(s.Finished)
		sy += float64(y(s))
	}
	if n < 2 {
		return 0, int(n), false
	}
	mx, my := sx/n, sy/n
	var sxx, sxy float64
	for _, s := range r.Samples {
		if s.At < r.Warmup() {
			continue
		}
		dx := float64(s.Finished) - mx
		sxx += dx * dx
		sxy += dx * (float64(y(s)) - my)
	}
	if sxx == 0 {
		return 0, int(n), false
	}
	return sxy / sxx, int(n), true
}

// PerPlanVerdict is PerPlan in a sentence, "" when it cannot tell.
func (r *SoakResult) PerPlanVerdict() string {
	b, n, ok := r.PerPlan()
	if !ok {
		return ""
	}
	what := "per retained plan"
	if r.Config.Retention > 0 && r.Config.Retention < r.Config.Duration {
		what = fmt.Sprintf("per plan finished (plans expired after the retention %s, so not a retained plan's cost)", r.Config.Retention)
	}
	v := fmt.Sprintf("%.2f KB of RSS %s: the slope of RSS over plans finished after the warm-up (%s, %d samples)",
		b/1024, what, r.Warmup(), n)
	if l, _, ok := r.PerPlanLive(); ok {
		v += fmt.Sprintf("; %.2f KB of it live heap (what the server's process keeps after a collection; the rest is the collector's room and free pages)", l/1024)
	}
	return v
}

// RetainedVerdict says what the system held at the end of the soak: the
// plans finished, whether all of them are still retained, the RSS then
// and the most any sample read. "" without samples.
func (r *SoakResult) RetainedVerdict() string {
	if len(r.Samples) == 0 {
		return ""
	}
	last := r.Samples[len(r.Samples)-1]
	var peak int64
	for _, s := range r.Samples {
		peak = max(peak, s.TotalRSS())
	}
	kept := "all of them retained"
	if r.Config.Retention > 0 && r.Config.Retention < last.At {
		kept = fmt.Sprintf("those of the last %s retained", r.Config.Retention)
	}
	per := ""
	if last.Finished > 0 {
		per = fmt.Sprintf(" (%.2f KB a plan finished, everything the process holds included)", float64(last.TotalRSS())/float64(last.Finished)/1024)
	}
	return fmt.Sprintf("At the end %d plans had finished, %s: RSS %.1f MB%s; at most %.1f MB over the soak",
		last.Finished, kept, float64(last.TotalRSS())/(1<<20), per, float64(peak)/(1<<20))
}

// soakState is what the result callbacks and the sampler share.
type soakState struct {
	mu        sync.Mutex
	submitted int
	finished  int
	failed    int
	latencies []time.Duration // since the last sample
}

// Soak submits cfg.Rate plans a second for cfg.Duration, open loop (a
// slow system falls behind rather than slowing the submissions; only a
// server that has not acknowledged the last submitWindow of them holds
// the next back), and
// samples every process's RSS, the plans finished and their latencies
// every cfg.Sample, and once more after the drain.
func (s *System) Soak(ctx context.Context, cfg SoakConfig) (*SoakResult, error) {
	if cfg.Duration <= 0 || cfg.Rate < 1 || cfg.RSS == nil {
		return nil, fmt.Errorf("bench: soak: want a duration, a rate of at least 1 and an RSS reader (got %s, %d)", cfg.Duration, cfg.Rate)
	}
	if cfg.Sample <= 0 {
		cfg.Sample = 10 * time.Second
	}
	if cfg.Drain <= 0 {
		cfg.Drain = time.Minute
	}
	if cfg.Workload == nil {
		w, err := Generate("many-plans-1")
		if err != nil {
			return nil, err
		}
		cfg.Workload = w
	}
	// The plan is encoded once; each submission swaps in its own id.
	const placeholder = "SOAKPLANIDXXXXXXXXXXXX"
	p, err := cfg.Workload.Plan(placeholder)
	if err != nil {
		return nil, fmt.Errorf("bench: soak: %w", err)
	}
	if cfg.PlanTimeout > 0 {
		p.TimeoutMs = cfg.PlanTimeout.Milliseconds()
	}
	doc, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	res := &SoakResult{Config: cfg}
	st := &soakState{}
	start := time.Now()
	pending := map[string]bool{}
	var pendingMu sync.Mutex
	warm := false
	sample := func() error {
		rss, err := cfg.RSS()
		if err != nil {
			return err
		}
		st.mu.Lock()
		lat := st.latencies
		st.latencies = nil
		smp := SoakSample{At: time.Since(start), RSS: rss, Submitted: st.submitted, Finished: st.finished, Failed: st.failed}
		st.mu.Unlock()
		if cfg.LiveHeap != nil {
			smp.LiveHeap = cfg.LiveHeap()
		}
		if len(lat) > 0 {
			pc := percentiles(lat)
			smp.P50, smp.P99 = pc[0], pc[1]
		}
		prevAt, prevDone := time.Duration(0), 0
		if n := len(res.Samples); n > 0 {
			prevAt, prevDone = res.Samples[n-1].At, res.Samples[n-1].Finished
		}
		smp.PlansPerSec = float64(smp.Finished-prevDone) / (smp.At - prevAt).Seconds()
		res.Samples = append(res.Samples, smp)
		if cfg.AtWarmUp != nil && !warm && smp.At >= res.Warmup() {
			warm = true
			cfg.AtWarmUp()
		}
		if cfg.Progress != nil {
			live := ""
			if cfg.LiveHeap != nil {
				live = fmt.Sprintf(" (live heap %.1f MB)", float64(smp.LiveHeap)/(1<<20))
			}
			fmt.Fprintf(cfg.Progress, "  soak %s: RSS %.1f MB%s, %d submitted, %d finished, %d failed, %.0f plans/s\n",
				smp.At.Round(time.Second), float64(smp.TotalRSS())/(1<<20), live, smp.Submitted, smp.Finished, smp.Failed, smp.PlansPerSec)
		}
		return nil
	}
	if err := sample(); err != nil {
		return nil, err
	}
	// Acknowledgements are collected as the submissions go on; only when
	// the server falls a submitter's window behind do they wait for it.
	sub := s.submitter()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	next := start.Add(cfg.Sample)
	sent := 0
	for {
		now := time.Now()
		elapsed := min(now.Sub(start), cfg.Duration)
		for due := int(elapsed.Seconds() * float64(cfg.Rate)); sent < due; sent++ {
			id := nuid.Next()
			body := bytes.Replace(doc, []byte(placeholder), []byte(id), -1)
			submitted := time.Now()
			pendingMu.Lock()
			pending[id] = true
			pendingMu.Unlock()
			s.await(id, func(r *planbus.ExecutionResult) {
				lat := time.Since(submitted)
				pendingMu.Lock()
				delete(pending, id)
				pendingMu.Unlock()
				st.mu.Lock()
				st.finished++
				if r == nil || !r.Success {
					st.failed++
				}
				st.latencies = append(st.latencies, lat)
				st.mu.Unlock()
			})
			if err := sub.publish(ctx, bus.PlanSubject(id), body, id); err != nil {
				return nil, fmt.Errorf("bench: soak: %w", err)
			}
			st.mu.Lock()
			st.submitted++
			st.mu.Unlock()
		}
		if !now.Before(next) {
			if err := sample(); err != nil {
				return nil, err
			}
			next = next.Add(cfg.Sample)
		}
		if elapsed >= cfg.Duration {
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// An acknowledgement's error is reported after the drain, with the
	// samples.
	ackErr := sub.wait(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Drain: wait for the plans still running, sampling on.
	deadline := time.Now().Add(cfg.Drain)
	for {
		pendingMu.Lock()
		left := len(pending)
		pendingMu.Unlock()
		if left == 0 || !time.Now().Before(deadline) {
			res.Lost = left
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !time.Now().Before(next) {
			if err := sample(); err != nil {
				return nil, err
			}
			next = next.Add(cfg.Sample)
		}
	}
	pendingMu.Lock()
	for id := range pending {
		s.forget(id)
	}
	pendingMu.Unlock()
	if err := sample(); err != nil {
		return nil, err
	}
	res.Samples[len(res.Samples)-1].End = true
	if ackErr != nil {
		return res, fmt.Errorf("bench: soak: %w", ackErr)
	}
	if res.Lost > 0 {
		return res, fmt.Errorf("bench: soak: %w: %d plans without a result %s after the last submission", ErrLost, res.Lost, cfg.Drain)
	}
	return res, nil
}

// ErrLost means plans of a soak never finished.
var ErrLost = errors.New("plans lost")

// ReportSoak prints the samples as a Markdown table and the verdict.
func ReportSoak(w io.Writer, r *SoakResult) {
	fmt.Fprintf(w, "| t | ")
	for _, n := range r.Config.Names {
		fmt.Fprintf(w, "RSS %s MB | ", n)
	}
	if len(r.Config.Names) > 1 {
		fmt.Fprintf(w, "RSS total MB | ")
	}
	live := r.Config.LiveHeap != nil
	if live {
		fmt.Fprintf(w, "live heap MB | ")
	}
	fmt.Fprintf(w, "submitted | finished | failed | plans/s | latency p50 / p99 |\n|---|")
	for range r.Config.Names {
		fmt.Fprintf(w, "---|")
	}
	if len(r.Config.Names) > 1 {
		fmt.Fprintf(w, "---|")
	}
	if live {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintf(w, "---|---|---|---|---|\n")
	for _, s := range r.Samples {
		end := ""
		if s.End {
			end = " (end)"
		}
		fmt.Fprintf(w, "| %s%s | ", s.At.Round(time.Second), end)
		for _, b := range s.RSS {
			fmt.Fprintf(w, "%.1f | ", float64(b)/(1<<20))
		}
		if len(r.Config.Names) > 1 {
			fmt.Fprintf(w, "%.1f | ", float64(s.TotalRSS())/(1<<20))
		}
		if live {
			fmt.Fprintf(w, "%.1f | ", float64(s.LiveHeap)/(1<<20))
		}
		lat := ""
		if s.P50 > 0 {
			lat = fmtDur(s.P50) + " / " + fmtDur(s.P99)
		}
		fmt.Fprintf(w, "%d | %d | %d | %.0f | %s |\n", s.Submitted, s.Finished, s.Failed, s.PlansPerSec, lat)
	}
	fmt.Fprintf(w, "\n%d plans a second for %s: %s; %d plans lost.\n", r.Config.Rate, r.Config.Duration, r.Verdict(), r.Lost)
	if pp := r.PerPlanVerdict(); pp != "" {
		fmt.Fprintf(w, "%s.\n", pp)
	}
	if rv := r.RetainedVerdict(); rv != "" {
		fmt.Fprintf(w, "%s.\n", rv)
	}
}
