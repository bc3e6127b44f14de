package server

// failureOutcome is how an episode whose Start or Step failed is counted:
// "abandoned" when the session ended under it (the client left, or the
// server is shutting down), which is what cut the call short, else "failed".
func (s *session) failureOutcome() string {
	if s.ctx.Err() != nil {
		return "abandoned"
	}
	return "failed"
}
