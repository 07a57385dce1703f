package skilltest_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/planbus/planbus/skill"
	"github.com/planbus/planbus/skill/skilltest"
)

type text struct {
	Text string `json:"text"`
}

type count struct {
	Words int `json:"words"`
}

// wordcount is the skill the examples test.
func wordcount() skill.Skill {
	return skill.Func("wordcount", "Counts the words of a text.",
		func(_ context.Context, in text) (count, error) {
			return count{Words: len(strings.Fields(in.Text))}, nil
		})
}

// A test calls the skill with a Go value as its input and decodes its
// output into another.
func ExampleCall() {
	t := exampleT() // in a test, its *testing.T

	res, err := skilltest.Call(t, wordcount(), text{Text: "to be or not to be"})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(skilltest.Output[count](t, res).Words)
	// Output: 6
}

// The input is checked against the manifest's input schema, as a worker
// checks it: the handler does not run, and the error is the INVALID_INPUT
// a plan would see.
func ExampleCall_invalidInput() {
	t := exampleT()

	_, err := skilltest.Call(t, wordcount(), map[string]any{"txt": "a typo"})
	info, _ := skill.ErrorInfo(err)
	fmt.Println(info.Category, info.Code)
	// Output: invalid_input INVALID_INPUT
}

// The call's timeout ends the handler's context; a retry is an attempt
// of its own.
func ExampleWithTimeout() {
	t := exampleT()
	slow := skill.Skill{
		Manifest: skill.Manifest{Name: "slow"},
		Handler: skill.HandlerFunc(func(ctx context.Context, call *skill.Call) (skill.Result, error) {
			fmt.Printf("attempt %d of %d, key %s\n", call.Attempt, call.MaxAttempts, call.IdempotencyKey())
			<-ctx.Done()
			return skill.Result{}, ctx.Err()
		}),
	}

	_, err := skilltest.Call(t, slow, nil, skilltest.WithTimeout(10*time.Millisecond), skilltest.WithAttempt(2, 3))
	info, _ := skill.ErrorInfo(err)
	fmt.Println(info.Category, info.Code)
	// Output:
	// attempt 2 of 3, key skilltest-plan/skilltest-tool/2
	// timeout TOOL_TIMEOUT
}

// exampleT stands in for the *testing.T of a test, which an Example has
// not: Fatal and Fatalf panic, and there is no output to log to.
func exampleT() testing.TB { return standIn{} }

type standIn struct{ testing.TB }

func (standIn) Helper()                           {}
func (standIn) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (standIn) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (standIn) Cleanup(func())                    {}
func (standIn) Context() context.Context          { return context.Background() }
func (standIn) Output() io.Writer                 { return io.Discard }
