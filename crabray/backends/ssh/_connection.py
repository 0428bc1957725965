"""Settings of the SSH backend and the one place that opens an SSH connection.

Kept apart from ``_backend.py`` so the connection rules (host keys, credentials,
bounded retries) read in one screen, and so the VM backend can build an
``SshSettings`` for its forwarded port without touching sandbox logic.

Which failures retry: a refused, reset or timed-out TCP connection and a
missing SSH banner (a machine still booting, a dropped link) retry with
backoff, at most ``retry.max_attempts`` times. A refused credential, an unknown or
changed host key and an unreadable key file never retry: waiting does not
fix them, so they are a ``ConfigError`` at once.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import paramiko
from pydantic import Field, SecretStr
from typing_extensions import override

from crabray.backends.settings import BackendSettings
from crabray.core.errors import ConfigError, SandboxError
from crabray.core.retry import RetryPolicy
from crabray.core.words import counted

logger = logging.getLogger(__name__)


SSH_RECONNECT = RetryPolicy(max_attempts=4, backoff_initial_sec=0.5, backoff_max_sec=8)
"""The default reconnection policy: four connection attempts, 0.5 s to 8 s apart."""


class SshSettings(BackendSettings):
    """The ``backend_settings`` the SSH backend understands.

    Credentials: ``key_path`` (with ``key_passphrase`` if it is encrypted) is
    the only key offered when given; with neither a key nor a password the SSH
    agent and the default keys (``~/.ssh/id_*``) are tried. ``password`` works
    but is discouraged: it is a secret in a config file.
    """

    host: str = Field(min_length=1, description="Host name or address of the machine.")
    port: int = Field(default=22, ge=1, le=65535, description="SSH port.")
    user: str = Field(min_length=1, description="Remote user the commands run as.")
    key_path: Path | None = Field(default=None, description="Private key file to log in with.")
    key_passphrase: SecretStr | None = Field(
        default=None, description="Passphrase of an encrypted `key_path`."
    )
    password: SecretStr | None = Field(
        default=None, description="Password login (discouraged; prefer a key or the agent)."
    )
    known_hosts: Path = Field(
        default=Path("~/.ssh/known_hosts"),
        description="OpenSSH known-hosts file the host key must be listed in.",
    )
    accept_unknown_host_keys: bool = Field(
        default=False,
        description="Accept (and log the fingerprint of) a host key the known-hosts file does "
        "not list. A key that contradicts the file is refused even so.",
    )
    connect_timeout_sec: float = Field(
        default=10.0, gt=0, description="TCP connect, banner and authentication timeout."
    )
    keepalive_sec: float = Field(
        default=15.0,
        ge=0,
        description="SSH keepalive interval, so a dead link is noticed; 0 = off.",
    )
    remote_root: str = Field(
        default="/tmp",
        min_length=1,
        description="Remote parent directory of the sandbox directories (made if missing).",
    )
    reset_command: str | None = Field(
        default=None,
        description="Shell command run in the fresh sandbox at the end of every reset "
        "(a hypervisor hook, a service restart); a non-zero exit fails the reset.",
    )
    reset_timeout_sec: float = Field(default=300.0, gt=0, description="Timeout of `reset_command`.")
    file_stall_sec: float = Field(
        default=30.0,
        gt=0,
        description="Longest wait for one SFTP reply while reading a file: a read that "
        "stalls longer (a FIFO swapped in after the check) fails as a file error and the "
        "SFTP session is replaced, so nothing the sandbox plants can hang the driver.",
    )
    shell: str = Field(
        default="/bin/sh", min_length=1, description="Remote shell that runs string commands."
    )
    retry: RetryPolicy = Field(
        default=SSH_RECONNECT, description="Reconnection after transport failures."
    )

    @property
    def address(self) -> str:
        """``user@host:port``, for messages (never carries a secret)."""
        return f"{self.user}@{self.host}:{self.port}"


class _HostKeyUnknown(paramiko.SSHException):
    """The server's host key is not in the known-hosts file (and accepting is off)."""

    def __init__(self, hostname: str, key: paramiko.PKey) -> None:
        self.hostname = hostname
        self.key = key
        super().__init__(f"host key of {hostname} unknown")


class _HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown host keys, or accept them for this connection only when asked.

    An accepted key is never written to the known-hosts file: trusting a
    machine permanently is the operator's decision, not a side effect.
    """

    def __init__(self, accept: bool) -> None:
        self.accept = accept

    @override
    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        if not self.accept:
            raise _HostKeyUnknown(hostname, key)
        logger.info(
            "accepting unknown %s host key of %s (fingerprint %s) because "
            "accept_unknown_host_keys is set",
            key.get_name(),
            hostname,
            key.fingerprint,
        )
        client.get_host_keys().add(hostname, key.get_name(), key)


def load_key(settings: SshSettings) -> paramiko.PKey | None:
    """Read ``key_path`` once, so a bad key file is a clear error rather than a retry.

    Raises:
        ConfigError: The file is missing, unreadable, encrypted without a
            passphrase, or not a private key.
    """
    if settings.key_path is None:
        return None
    path = settings.key_path.expanduser()
    passphrase = settings.key_passphrase.get_secret_value() if settings.key_passphrase else None
    try:
        # paramiko annotates the password as str but hands it to cryptography, which takes bytes.
        password = passphrase.encode() if passphrase else None
        return paramiko.PKey.from_path(path, password=password)  # type: ignore[arg-type]
    except (paramiko.PasswordRequiredException, TypeError):
        # cryptography reports a missing passphrase, and one given for a plain key, as a
        # TypeError.
        reason = (
            "the key is not encrypted; leave key_passphrase out"
            if passphrase
            else "the key is encrypted; set key_passphrase (or use the SSH agent)"
        )
    except (OSError, paramiko.SSHException, ValueError) as exc:
        reason = _without_secrets(str(exc), settings) or type(exc).__name__
    raise ConfigError(
        f"cannot use the SSH key {path} for {settings.address}: {reason}",
        field="backend_settings.key_path",
    )


def connect(settings: SshSettings, key: paramiko.PKey | None, purpose: str) -> paramiko.SSHClient:
    """Open an authenticated connection, retrying transport failures per ``settings.retry``.

    Args:
        settings: Where to connect and how to authenticate.
        key: The key from :func:`load_key` (``None`` for agent/default keys or a password).
        purpose: What the connection is for, for messages (``"sandbox 'shell'"``).

    Returns:
        A connected client; the caller closes it.

    Raises:
        ConfigError: Authentication failed or the host key is unknown or changed (no retry).
        SandboxError: Every attempt failed to reach the server.
    """
    policy = settings.retry
    last: BaseException | None = None
    for attempt in range(1, policy.max_attempts + 1):
        client = paramiko.SSHClient()
        known_hosts = settings.known_hosts.expanduser()
        try:
            if known_hosts.is_file():
                client.load_host_keys(str(known_hosts))
            client.set_missing_host_key_policy(_HostKeyPolicy(settings.accept_unknown_host_keys))
            client.connect(
                settings.host,
                port=settings.port,
                username=settings.user,
                pkey=key,
                password=settings.password.get_secret_value() if settings.password else None,
                allow_agent=key is None and settings.password is None,
                look_for_keys=key is None and settings.password is None,
                timeout=settings.connect_timeout_sec,
                banner_timeout=settings.connect_timeout_sec,
                auth_timeout=settings.connect_timeout_sec,
                channel_timeout=settings.connect_timeout_sec,
            )
        except paramiko.AuthenticationException:
            client.close()
            how = (
                f"key {settings.key_path}"
                if key is not None
                else "password"
                if settings.password is not None
                else "the SSH agent and default keys"
            )
            raise ConfigError(
                f"{settings.address} refused the login of {purpose} with {how}; "
                "check user, key_path/password and the server's authorized_keys "
                "(not retried: a wrong credential does not fix itself)",
                field="backend_settings.key_path" if key is not None else "backend_settings.user",
            ) from None
        except _HostKeyUnknown as exc:
            client.close()
            raise ConfigError(
                f"the {exc.key.get_name()} host key of {settings.address} "
                f"(fingerprint {exc.key.fingerprint}) is not in {known_hosts}; "
                "add it there (ssh-keyscan -p PORT HOST >> FILE, after checking the fingerprint) "
                "or set accept_unknown_host_keys",
                field="backend_settings.known_hosts",
            ) from None
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise ConfigError(
                f"the host key of {settings.address} does not match {known_hosts} "
                f"(server offers {exc.key.fingerprint}): the machine changed or someone is in "
                "between; refusing to connect",
                field="backend_settings.known_hosts",
            ) from None
        except (OSError, EOFError, paramiko.SSHException) as exc:
            client.close()
            last = exc
            if attempt == policy.max_attempts:
                break
            delay = policy.backoff_sec(attempt)
            logger.warning(
                "cannot reach %s for %s (attempt %d of %d): %s; retrying in %.1f s",
                settings.address,
                purpose,
                attempt,
                policy.max_attempts,
                _without_secrets(str(exc), settings) or type(exc).__name__,
                delay,
            )
            time.sleep(delay)
            continue
        transport = client.get_transport()
        if transport is not None and settings.keepalive_sec > 0:
            transport.set_keepalive(max(1, round(settings.keepalive_sec)))
        logger.debug("connected to %s for %s (attempt %d)", settings.address, purpose, attempt)
        return client
    reason = _without_secrets(str(last), settings) or type(last).__name__
    raise SandboxError(
        f"cannot reach {settings.address} for {purpose} "
        f"after {counted(policy.max_attempts, 'attempt')}: {reason}"
    )


def _without_secrets(text: str, settings: SshSettings) -> str:
    """``text`` with any secret of ``settings`` masked; a last guard on third-party messages."""
    for secret in (settings.password, settings.key_passphrase):
        if secret is not None and secret.get_secret_value():
            text = text.replace(secret.get_secret_value(), "**********")
    return text
