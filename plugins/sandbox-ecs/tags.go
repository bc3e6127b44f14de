package ecs

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// tagSandbox is the tag holding the sandbox's id; tasks without it are not
// agentenv's and List leaves them alone.
const tagSandbox = "agentenv.sandbox-id"

// ECS's tag rules: keys of 1-128 and values of up to 256 of these
// characters; "aws:" is AWS's.
var tagChars = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$`)

// tagsOf turns labels into the task's tags, refusing what ECS would.
func tagsOf(labels map[string]string, id string) ([]types.Tag, error) {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tags := make([]types.Tag, 0, len(keys)+1)
	for _, k := range keys {
		v := labels[k]
		switch {
		case k == tagSandbox:
			return nil, fmt.Errorf("label %s is the plugin's own; choose another key", k)
		case len(k) == 0 || len(k) > 128 || len(v) > 256:
			return nil, fmt.Errorf("label %s=%q cannot be an ECS tag: keys have 1 to 128 characters, values up to 256", k, v)
		case !tagChars.MatchString(k) || !tagChars.MatchString(v):
			return nil, fmt.Errorf("label %s=%q cannot be an ECS tag: tags hold letters, digits, spaces and _ . : / = + - @ only", k, v)
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return nil, fmt.Errorf("label %s cannot be an ECS tag: the aws: prefix is AWS's", k)
		}
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	if len(tags) >= 50 {
		return nil, fmt.Errorf("%d labels: an ECS task holds at most 50 tags, one of them the plugin's", len(tags))
	}
	return append(tags, types.Tag{Key: aws.String(tagSandbox), Value: aws.String(id)}), nil
}

// labelsOf reads a task's tags back: its labels and its sandbox id ("" for
// a task agentenv did not start).
func labelsOf(tags []types.Tag) (map[string]string, string) {
	labels := map[string]string{}
	id := ""
	for _, t := range tags {
		k, v := aws.ToString(t.Key), aws.ToString(t.Value)
		if k == tagSandbox {
			id = v
			continue
		}
		labels[k] = v
	}
	return labels, id
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// startedByBad are the characters ECS refuses in StartedBy.
var startedByBad = regexp.MustCompile(`[^A-Za-z0-9_/-]`)

// startedBy is the task's StartedBy: the server label, so ListTasks finds
// one server's tasks in a shared cluster without describing the others.
func startedBy(labels map[string]string) string {
	s := "agentenv"
	if server := labels[sandbox.LabelServer]; server != "" {
		s += "-" + startedByBad.ReplaceAllString(server, "-")
	}
	if len(s) > 128 {
		s = s[:128]
	}
	return s
}
