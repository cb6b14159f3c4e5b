"""Text helpers."""


def word_count(text):
    """Return the number of words in text, words being separated by white space."""
    if not text:
        return 0
    return len(text.split(" "))
