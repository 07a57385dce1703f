// Package llm reaches language models behind OpenAI-compatible Chat
// Completions endpoints (Ollama, vLLM, llama.cpp's server, OpenAI) through
// the official openai-go client: the llm planner (internal/generator) and
// the llm skill (internal/skills) share it.
package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/planbus/planbus"
)

// Endpoint is where a model is asked.
type Endpoint struct {
	// URL is the API's base URL, such as http://127.0.0.1:11434/v1.
	URL string
	// Model is asked when a call names none.
	Model string
	// APIKey is sent as the bearer token; empty sends none.
	APIKey string
	// HTTPClient makes the requests; nil uses http.DefaultClient.
	HTTPClient *http.Client
}

// Client is the endpoint's client. It does not retry: a caller's budget
// (its context) bounds the one try.
func (e Endpoint) Client() openai.Client {
	opts := []option.RequestOption{option.WithBaseURL(e.URL), option.WithMaxRetries(0)}
	if e.APIKey != "" {
		opts = append(opts, option.WithAPIKey(e.APIKey))
	} else {
		// The SDK would read OPENAI_API_KEY; planbus takes its key from
		// PLANBUS_LLM_API_KEY only, and sends none without one.
		opts = append(opts, option.WithAPIKey(""), option.WithHeaderDel("Authorization"))
	}
	if e.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(e.HTTPClient))
	}
	return openai.NewClient(opts...)
}

// Classify says what a failed completion means: out of time (ctx ended),
// refused by the API (a 4xx other than 429: permanent), or unreachable or
// overloaded (network), and says so in a message.
func (e Endpoint) Classify(ctx context.Context, err error) (planbus.Category, string) {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return planbus.CategoryTimeout, fmt.Sprintf("the model at %s did not answer in time", e.URL)
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		cat := planbus.CategoryNetwork
		if apiErr.StatusCode >= 400 && apiErr.StatusCode < 500 && apiErr.StatusCode != http.StatusTooManyRequests {
			cat = planbus.CategoryPermanent
		}
		return cat, fmt.Sprintf("the model at %s refused: %d %s", e.URL, apiErr.StatusCode, strings.TrimSpace(apiErr.Message))
	}
	return planbus.CategoryNetwork, fmt.Sprintf("the model at %s: %v", e.URL, err)
}
