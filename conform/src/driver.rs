//! The implementation under test, as a child process spoken to in JSON
//! lines over its stdin and stdout. Its stderr is left on the kit's, so a
//! driver's own traceback shows where it broke.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use serde_json::Value as Json;

use crate::error::ConformError;
use crate::wire::{PROTOCOL_VERSION, field, str_field, u64_field};

/// The most bytes one line from a driver may hold: a step is a statement
/// and its parameters, far below this; a driver that streams without a
/// newline is cut off instead of filling the kit's memory.
const MAX_LINE_BYTES: usize = 16 << 20;

/// What a driver announced in its `hello`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The implementation's name, for the report.
    pub implementation: String,
    /// The machines it implements.
    pub machines: Vec<String>,
}

/// A running driver.
#[derive(Debug)]
pub struct Driver {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Result<String, std::io::Error>>,
    timeout: Duration,
    /// True once the shell was waited for after `bye`; until then its pid
    /// names the driver's process group.
    reaped: bool,
}

impl Driver {
    /// Starts `command` with `sh -c` and reads its `hello`.
    ///
    /// The driver runs in a process group of its own, so that stopping it
    /// (a timeout, a difference, an error) stops every process the command
    /// started, not only the shell: a `sh -c` wrapper's children would
    /// otherwise outlive the kit. A terminal's Ctrl-C therefore reaches the
    /// kit, not the driver; the driver sees its stdin close when the kit
    /// exits.
    pub fn spawn(command: &str, timeout: Duration) -> Result<(Self, Hello), ConformError> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| ConformError::Spawn {
                command: command.to_owned(),
                source,
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            // Both were asked for as pipes just above, so both are there.
            return Err(ConformError::Closed {
                doing: "starting the driver",
            });
        };
        let (tx, rx) = channel();
        // One reader thread per driver: the kit waits on the channel with a
        // timeout, which a blocking read on the pipe could not do.
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                let read = (&mut reader)
                    .take(MAX_LINE_BYTES as u64)
                    .read_line(&mut line);
                match read {
                    Ok(0) => break,
                    Ok(_) => {
                        if tx.send(Ok(line)).is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        break;
                    }
                }
            }
        });
        let mut driver = Self {
            child,
            stdin,
            lines: rx,
            timeout,
            reaped: false,
        };
        let hello = driver.recv("waiting for the driver's hello")?;
        let hello = field(&hello, "hello").map_err(|_| ConformError::BadMessage {
            what: format!("the driver's first line must be a hello, got {hello}"),
        })?;
        let version = u64_field(hello, "protocol")?;
        if version != PROTOCOL_VERSION {
            return Err(ConformError::Version {
                driver: version,
                kit: PROTOCOL_VERSION,
            });
        }
        let machines = field(hello, "machines")?
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(Json::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let implementation = str_field(hello, "implementation")?.to_owned();
        Ok((
            driver,
            Hello {
                implementation,
                machines,
            },
        ))
    }

    /// Sends one message.
    pub fn send(&mut self, message: &Json) -> Result<(), ConformError> {
        // A driver that exited closed its stdin too: that is the driver
        // gone, as a closed stdout is, not a fault of the kit's pipe.
        let io = |source: std::io::Error| match source.kind() {
            std::io::ErrorKind::BrokenPipe => ConformError::Closed {
                doing: "writing to the driver",
            },
            _ => ConformError::Io {
                doing: "writing to the driver",
                source,
            },
        };
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).map_err(io)?;
        self.stdin.flush().map_err(io)
    }

    /// Reads the driver's next line as JSON; `doing` says what for, in
    /// errors.
    pub fn recv(&mut self, doing: &'static str) -> Result<Json, ConformError> {
        let line = match self.lines.recv_timeout(self.timeout) {
            Ok(Ok(line)) => line,
            Ok(Err(source)) => return Err(ConformError::Io { doing, source }),
            Err(RecvTimeoutError::Timeout) => {
                return Err(ConformError::Timeout {
                    seconds: self.timeout.as_secs(),
                    doing,
                });
            }
            Err(RecvTimeoutError::Disconnected) => return Err(ConformError::Closed { doing }),
        };
        if !line.ends_with('\n') {
            return Err(ConformError::BadMessage {
                what: format!("a line of more than {MAX_LINE_BYTES} bytes, or cut short"),
            });
        }
        let json: Json = serde_json::from_str(&line).map_err(|e| ConformError::BadMessage {
            what: format!("not JSON ({e}): {}", line.trim_end()),
        })?;
        if let Some(message) = json.get("error") {
            return Err(ConformError::DriverError {
                message: message.as_str().unwrap_or("(not a string)").to_owned(),
            });
        }
        Ok(json)
    }

    /// Says goodbye and waits for the driver to exit; a non-zero exit is
    /// an error.
    pub fn finish(mut self) -> Result<(), ConformError> {
        self.send(&serde_json::json!({ "bye": {} }))?;
        let status = self.child.wait().map_err(|source| ConformError::Io {
            doing: "waiting for the driver to exit",
            source,
        })?;
        self.reaped = true;
        if status.success() {
            Ok(())
        } else {
            Err(ConformError::DriverError {
                message: format!("the driver exited with {status} after bye"),
            })
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // A driver left behind after a difference or an error is stopped:
        // it may be waiting for an input that will never come. The whole
        // group is stopped, so a `sh -c` wrapper's children go with it, and
        // before the shell is reaped: until then its pid, which is the
        // group's id, cannot be reused to name another group.
        if !self.reaped {
            let group = rustix::process::Pid::from_child(&self.child);
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
