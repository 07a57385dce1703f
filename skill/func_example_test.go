package skill_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/planbus/planbus/skill"
)

// A typed skill: Func derives the manifest's input and output schemas from
// the function's types, decodes each call's input and encodes its output.
// A field tagged omitempty is one a plan may leave out; the jsonschema tag
// describes a field to planners.
func ExampleFunc() {
	type input struct {
		Text  string `json:"text" jsonschema:"the text to count the words of"`
		Limit *int   `json:"limit,omitempty" jsonschema:"count at most this many words"`
	}
	type output struct {
		Words int `json:"words"`
	}
	wordcount := skill.Func("wordcount", "Counts the words of a text.",
		func(_ context.Context, in input) (output, error) {
			n := len(strings.Fields(in.Text))
			if in.Limit != nil {
				if *in.Limit < 0 {
					return output{}, skill.InvalidInput("limit %d is negative", *in.Limit)
				}
				n = min(n, *in.Limit)
			}
			return output{Words: n}, nil
		})
	wordcount.Manifest.Version = "1"

	var schema bytes.Buffer
	_ = json.Indent(&schema, wordcount.Manifest.InputSchema, "", "  ")
	fmt.Println(schema.String())
	fmt.Println(string(wordcount.Manifest.OutputSchema))

	for _, in := range []string{`{"text": "to be or not to be"}`, `{"text": "to be", "limit": -1}`} {
		res, err := wordcount.Handler.Handle(context.Background(), &skill.Call{Skill: "wordcount", Input: json.RawMessage(in)})
		if err != nil {
			info, _ := skill.ErrorInfo(err)
			fmt.Println(info.Code, info.Message)
			continue
		}
		fmt.Println(string(res.Output))
	}
	// Output:
	// {
	//   "type": "object",
	//   "properties": {
	//     "text": {
	//       "type": "string",
	//       "description": "the text to count the words of"
	//     },
	//     "limit": {
	//       "type": [
	//         "null",
	//         "integer"
	//       ],
	//       "description": "count at most this many words"
	//     }
	//   },
	//   "required": [
	//     "text"
	//   ],
	//   "additionalProperties": false
	// }
	// {"type":"object","properties":{"words":{"type":"integer"}},"required":["words"],"additionalProperties":false}
	// {"words":6}
	// INVALID_INPUT limit -1 is negative
}
