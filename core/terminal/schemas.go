package terminal

import "fmt"

// The tools' input schemas, as tools/list shows them (docs/harbor-tools.md
// quotes them; a test keeps the two the same).

const shellSchema = `{
  "type": "object",
  "properties": {
    "command": {
      "type": "string",
      "description": "The bash command to run, e.g. \"ls -la\" or \"python3 -m pytest -q tests/\". Several lines are allowed; chain steps with && so a failure stops the rest."
    },
    "timeout_sec": {
      "type": "integer",
      "minimum": 1,
      "maximum": 1800,
      "description": "Seconds before the command and every process it started are killed. Default 120."
    }
  },
  "required": ["command"],
  "additionalProperties": false
}`

const editorSchema = `{
  "type": "object",
  "properties": {
    "command": {
      "type": "string",
      "enum": ["view", "create", "str_replace", "insert"],
      "description": "What to do: view a file or folder, create (or overwrite) a file, replace one exact string in a file, or insert lines into a file."
    },
    "path": {
      "type": "string",
      "description": "The file or folder: absolute, or relative to the working directory."
    },
    "file_text": {
      "type": "string",
      "description": "create: the whole content of the file."
    },
    "old_str": {
      "type": "string",
      "description": "str_replace: the exact text to replace, whitespace and indentation included. It must occur exactly once in the file; include a few surrounding lines to make it unique."
    },
    "new_str": {
      "type": "string",
      "description": "str_replace: the text that replaces old_str (empty deletes it). insert: the lines to insert."
    },
    "insert_line": {
      "type": "integer",
      "minimum": 0,
      "description": "insert: the line number after which new_str goes; 0 inserts at the top of the file."
    },
    "view_range": {
      "type": "array",
      "items": {"type": "integer"},
      "minItems": 2,
      "maxItems": 2,
      "description": "view: [first, last] line numbers to show, 1-based and inclusive; last -1 means to the end of the file. Default: the whole file."
    }
  },
  "required": ["command", "path"],
  "additionalProperties": false
}`

const runTestsSchema = `{
  "type": "object",
  "properties": {
    "files_tgz_b64": {
      "type": "string",
      "description": "The task's tests folder as a gzip-compressed tar, base64-encoded; its entries are relative to the folder."
    },
    "dir": {
      "type": "string",
      "description": "Absolute folder the tests are unpacked into, replacing what it held. Default /tests."
    },
    "script": {
      "type": "string",
      "description": "The script run with bash. Default dir/test.sh."
    },
    "env": {
      "type": "object",
      "additionalProperties": {"type": "string"},
      "description": "Variables added to the script's environment."
    },
    "timeout_sec": {
      "type": "integer",
      "minimum": 1,
      "description": "Seconds before the script and every process it started are killed. Default 600."
    }
  },
  "required": ["files_tgz_b64"],
  "additionalProperties": false
}`

func shellDescription(workdir string, maxOutput int) string {
	return fmt.Sprintf(`Run a bash command in the task's environment and get its exit code, stdout and stderr.
Each call runs a fresh "bash -c" in %s: a cd, a variable or an export does not carry over to the next call (chain commands with && or write a script).
stdin is empty: interactive programs (editors, pagers, prompts) get end of input, so pass flags such as -y, or use the editor tool to change files.
The command and every process it started are killed at the timeout (timeout_sec, default 120 s, at most 1800 s).
stdout and stderr are each cut to their first and last %d KB when longer, with a note saying how many bytes were cut: send long output to a file and search it.
A non-zero exit code is a normal result, not an error.
To leave a server running, start it in the background with its output sent to a file, e.g. "nohup python3 app.py > /tmp/app.log 2>&1 &".`,
		workdir, maxOutput/2/1024)
}

func editorDescription(workdir string) string {
	return fmt.Sprintf(`View, create and edit files. Paths are absolute or relative to %s.
- view: show a file with line numbers (as cat -n does), or list a folder two levels deep (hidden entries skipped). view_range [first, last] shows part of a long file.
- create: write file_text to path, making missing parent folders; an existing file is overwritten.
- str_replace: replace old_str with new_str. old_str must match exactly one place in the file, character for character, whitespace and indentation included; when it matches no place or several, nothing changes and the error says so.
- insert: insert new_str as new lines after line insert_line (0 = at the top).
Line numbers shown by view are not part of the file: leave them out of old_str.`, workdir)
}

func runTestsDescription(logs string) string {
	return fmt.Sprintf(`Not for the agent: agentenv's verify_tests step calls it when the episode ends.
Empties %[1]s, unpacks files_tgz_b64 into dir (replacing it), runs script with bash in the working directory with env added, kills it at timeout_sec, then reads the reward it wrote: %[1]s/reward.txt (one number: the score "reward") or %[1]s/reward.json (an object of numbers: a score per key).
Result: JSON {"scores": {...}, "exit_code": N, "output_tail": "..."}. Failures are tool errors whose text starts with a cause: timeout, no_reward, bad_reward, bad_request, internal.`, logs)
}
