package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Proc is a component to run as a process of its own.
type Proc struct {
	Name string   // for errors and tables: "dispatcher-1"
	Path string   // the program
	Args []string // its arguments
}

// Procs are running component processes. Their CPU time and RSS are read
// from /proc while they run (a process's figures vanish when it ends, and
// RUSAGE_CHILDREN counts only children already waited for). Methods may
// be called from any goroutine; Stop once.
type Procs struct {
	procs  []*child
	stderr io.Writer
}

type child struct {
	Proc
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	err  error // why it ended; valid once done is closed
}

// StartProcs starts every process, their output going to stderr. On
// Linux each is killed if this process dies first (best effort: the
// signal follows the thread that started it). If one cannot start, those
// started are stopped.
func StartProcs(specs []Proc, stderr io.Writer) (*Procs, error) {
	p := &Procs{stderr: stderr}
	for _, s := range specs {
		cmd := exec.Command(s.Path, s.Args...)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		cmd.SysProcAttr = childAttr()
		if err := cmd.Start(); err != nil {
			p.Stop()
			return nil, fmt.Errorf("bench: start %s (%s): %w", s.Name, s.Path, err)
		}
		c := &child{Proc: s, cmd: cmd, done: make(chan struct{})}
		go func() {
			err := cmd.Wait()
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			close(c.done)
		}()
		p.procs = append(p.procs, c)
	}
	return p, nil
}

// Names of the processes, in start order.
func (p *Procs) Names() []string {
	var out []string
	for _, c := range p.procs {
		out = append(out, c.Name)
	}
	return out
}

// alive returns an error naming the first process that has ended.
func (p *Procs) alive() error {
	for _, c := range p.procs {
		select {
		case <-c.done:
			c.mu.Lock()
			defer c.mu.Unlock()
			return fmt.Errorf("bench: %s (pid %d) ended: %v", c.Name, c.cmd.Process.Pid, c.err)
		default:
		}
	}
	return nil
}

// CPU is the CPU time, user and system, of every process so far. It fails
// if one has ended: its time would be lost.
func (p *Procs) CPU() (time.Duration, error) {
	var sum time.Duration
	for _, c := range p.procs {
		d, err := ProcCPU(c.cmd.Process.Pid)
		if err != nil {
			return 0, errors.Join(err, p.alive())
		}
		sum += d
	}
	return sum, p.alive()
}

// RSS is each process's resident set size in bytes, in start order.
func (p *Procs) RSS() ([]int64, error) {
	out := make([]int64, len(p.procs))
	for i, c := range p.procs {
		r, err := RSS(c.cmd.Process.Pid)
		if err != nil {
			return nil, errors.Join(err, p.alive())
		}
		out[i] = r
	}
	return out, p.alive()
}

// Watch returns a context that is cancelled, with the error naming the
// process, when any of the processes ends before Stop; cancel releases it.
func (p *Procs) Watch(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancelCause(ctx)
	for _, c := range p.procs {
		go func() {
			select {
			case <-c.done:
				cancel(p.alive())
			case <-wctx.Done():
			}
		}()
	}
	return wctx, func() { cancel(nil) }
}

// Err names the first process that has ended, or is nil.
func (p *Procs) Err() error { return p.alive() }

// stopWait is how long a process has to end after SIGTERM before it is
// killed.
const stopWait = 15 * time.Second

// Stop asks every process to end (SIGTERM, a graceful drain) and kills
// those still running after 15 s.
func (p *Procs) Stop() {
	for _, c := range p.procs {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(stopWait)
	for _, c := range p.procs {
		select {
		case <-c.done:
		case <-deadline:
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
}
