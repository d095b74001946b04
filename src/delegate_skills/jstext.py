"""JavaScript's idea of white space, for text the Node bundle trims (String#trim)."""

from __future__ import annotations

# JavaScript's String#trim strips these (WhiteSpace and LineTerminator).
_JS_SPACE = (
    "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(value: str) -> str:
    """String#trim: JavaScript's idea of surrounding white space."""
    return value.strip(_JS_SPACE)
