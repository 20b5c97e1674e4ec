"""The screens' common ground: the base screen and dialog, the keys that go back, and what a screen may
read from the app it runs in.

A screen reads state through ``DoctorHost`` (attributes down) and asks for work by posting a message of
``oomdoctor.tui.messages`` (messages up); nothing here, nor in any screen, imports the app.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from textual.screen import ModalScreen, Screen

from oomdoctor.tui.bindings import bind, localize_bindings

if TYPE_CHECKING:
    from oomdoctor.facts.gpu import GpuSource
    from oomdoctor.i18n import Lang
    from oomdoctor.tui.session import Session

# Keys that go back or close without Esc: a browser terminal (JupyterLab) takes focus from the terminal
# on a second Esc, and the next key is lost.
BACK_KEYS = "b,backspace"


class DoctorHost(Protocol):
    """What the screens read from the app: its session, the GPU source and the clock. State only: the
    app's methods are not part of it, a screen posts a request message instead."""

    session: Session
    gpu_source: GpuSource | None
    clock: Callable[[], float]


def host_of(screen: Screen[Any]) -> DoctorHost:
    """The app a screen runs in, seen as what a screen may read of it."""
    return cast("DoctorHost", screen.app)


class DoctorScreen(Screen[None]):
    """A screen of the oomdoctor app: it re-labels its footer and re-renders on a language switch."""

    @property
    def doctor(self) -> DoctorHost:
        return host_of(self)

    composed = False
    """True once the screen's Mount came, which Textual sends after the composed children are mounted:
    ``is_mounted`` turns true before them, so a worker's early report must wait for this instead."""

    @property
    def lang(self) -> Lang:
        return self.doctor.session.lang

    def on_mount(self) -> None:
        self.composed = True
        localize_bindings(self, self.lang)

    async def relabel(self) -> None:
        """Called by the app after a language switch."""
        localize_bindings(self, self.lang)
        await self.refresh_view()
        self.refresh_bindings()

    async def refresh_view(self) -> None:  # pragma: no cover - every screen overrides it
        return None


class DoctorModal(ModalScreen[object]):
    """A dialog; Escape closes it without a result, and so do b and Backspace (keys a browser leaves to
    the terminal) in dialogs without a text field."""

    BINDINGS = [
        bind("escape", "close", id="close", show=False),
        bind(BACK_KEYS, "close", id="close"),
    ]

    @property
    def doctor(self) -> DoctorHost:
        return host_of(self)

    @property
    def lang(self) -> Lang:
        return self.doctor.session.lang

    def on_mount(self) -> None:
        localize_bindings(self, self.lang)

    def action_close(self) -> None:
        self.dismiss(None)
