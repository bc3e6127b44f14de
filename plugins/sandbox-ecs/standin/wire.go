package standin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// The ECS JSON 1.1 shapes the stand-in reads and writes: the fields of
// AWS's API reference that the operations it serves use, spelt as on the
// wire. Timestamps are epoch seconds, as ECS sends them.

type tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type keyValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type portMapping struct {
	ContainerPort int    `json:"containerPort,omitempty"`
	HostPort      int    `json:"hostPort,omitempty"`
	Protocol      string `json:"protocol,omitempty"`
}

type logConfiguration struct {
	LogDriver string            `json:"logDriver"`
	Options   map[string]string `json:"options,omitempty"`
}

type containerDefinition struct {
	Name             string            `json:"name"`
	Image            string            `json:"image"`
	Essential        *bool             `json:"essential,omitempty"`
	Command          []string          `json:"command,omitempty"`
	Environment      []keyValue        `json:"environment,omitempty"`
	PortMappings     []portMapping     `json:"portMappings,omitempty"`
	LogConfiguration *logConfiguration `json:"logConfiguration,omitempty"`
}

type taskDefinition struct {
	TaskDefinitionArn       string                `json:"taskDefinitionArn"`
	Family                  string                `json:"family"`
	Revision                int                   `json:"revision"`
	Status                  string                `json:"status"`
	NetworkMode             string                `json:"networkMode,omitempty"`
	RequiresCompatibilities []string              `json:"requiresCompatibilities,omitempty"`
	Compatibilities         []string              `json:"compatibilities,omitempty"`
	Cpu                     string                `json:"cpu,omitempty"`
	Memory                  string                `json:"memory,omitempty"`
	ExecutionRoleArn        string                `json:"executionRoleArn,omitempty"`
	TaskRoleArn             string                `json:"taskRoleArn,omitempty"`
	ContainerDefinitions    []containerDefinition `json:"containerDefinitions"`
	RegisteredAt            epoch                 `json:"registeredAt"`
}

type attachmentDetail = keyValue

type attachment struct {
	ID      string             `json:"id"`
	Type    string             `json:"type"`
	Status  string             `json:"status"`
	Details []attachmentDetail `json:"details"`
}

type networkInterface struct {
	AttachmentID       string `json:"attachmentId"`
	PrivateIpv4Address string `json:"privateIpv4Address"`
}

type container struct {
	ContainerArn      string             `json:"containerArn"`
	TaskArn           string             `json:"taskArn"`
	Name              string             `json:"name"`
	Image             string             `json:"image"`
	LastStatus        string             `json:"lastStatus"`
	ExitCode          *int               `json:"exitCode,omitempty"`
	Reason            string             `json:"reason,omitempty"`
	NetworkInterfaces []networkInterface `json:"networkInterfaces,omitempty"`
}

type containerOverride struct {
	Name        string     `json:"name"`
	Command     []string   `json:"command,omitempty"`
	Environment []keyValue `json:"environment,omitempty"`
}

type taskOverride struct {
	ContainerOverrides []containerOverride `json:"containerOverrides,omitempty"`
}

// task is a task as DescribeTasks answers it.
type task struct {
	TaskArn           string       `json:"taskArn"`
	ClusterArn        string       `json:"clusterArn"`
	TaskDefinitionArn string       `json:"taskDefinitionArn"`
	LastStatus        string       `json:"lastStatus"`
	DesiredStatus     string       `json:"desiredStatus"`
	LaunchType        string       `json:"launchType,omitempty"`
	CapacityProvider  string       `json:"capacityProviderName,omitempty"`
	PlatformVersion   string       `json:"platformVersion,omitempty"`
	StartedBy         string       `json:"startedBy,omitempty"`
	Cpu               string       `json:"cpu,omitempty"`
	Memory            string       `json:"memory,omitempty"`
	Connectivity      string       `json:"connectivity,omitempty"`
	Attachments       []attachment `json:"attachments"`
	Containers        []container  `json:"containers"`
	Overrides         taskOverride `json:"overrides"`
	Tags              []tag        `json:"tags,omitempty"`
	StoppedReason     string       `json:"stoppedReason,omitempty"`
	StopCode          string       `json:"stopCode,omitempty"`
	CreatedAt         epoch        `json:"createdAt"`
	StartedAt         epoch        `json:"startedAt,omitzero"`
	StoppingAt        epoch        `json:"stoppingAt,omitzero"`
	StoppedAt         epoch        `json:"stoppedAt,omitzero"`
	Version           int          `json:"version"`
}

type failure struct {
	Arn    string `json:"arn,omitempty"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// epoch is a time written as ECS writes it: seconds since 1970, fractional.
type epoch time.Time

func (e epoch) IsZero() bool { return time.Time(e).IsZero() }

func (e epoch) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", float64(time.Time(e).UnixMilli())/1000)), nil
}

func (e *epoch) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*e = epoch(time.UnixMilli(int64(f * 1000)))
	return nil
}

// apiError is an ECS error reply: the status and the __type ECS sends.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func invalidParameter(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "InvalidParameterException", fmt.Sprintf(format, args...)}
}

func clientError(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "ClientException", fmt.Sprintf(format, args...)}
}

var (
	errClusterNotFound = &apiError{http.StatusBadRequest, "ClusterNotFoundException", "Cluster not found."}
	errThrottled       = &apiError{http.StatusBadRequest, "ThrottlingException", "Rate exceeded"}
	errLostReply       = &apiError{http.StatusInternalServerError, "ServerException", "Service encountered an internal error (the stand-in dropped this reply on purpose)"}
)
